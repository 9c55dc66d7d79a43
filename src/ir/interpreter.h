// The reference interpreter: runs any graph op by op in plain C++, every value held as double.
// It is the oracle of the differential tests and is never a silent fallback for failed compiles.
#pragma once

#include "ir/node.h"

#include <kiln/array.h>

#include <vector>

namespace kiln::ir {

// A dense row-major host tensor whose elements are stored as double.
struct HostTensor {
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  std::vector<double> values;

  int64_t numel() const;
  static HostTensor from_array(const Array& a);  // any strides
  // Writes into a contiguous Array of the same dtype and shape (converting each value).
  void to_array(Array& out) const;
};

// Rounds a double to what `dtype` can hold (integers wrap like C++ two's complement, bool is != 0,
// float16/bfloat16/float32 round to nearest even).
double round_to_dtype(double v, DType dtype);

// One element in `dtype`'s storage format read as a double, and written from one (rounded and
// wrapped as round_to_dtype does). The one place element bytes are converted.
double decode_element(DType dtype, const void* p);
void encode_element(DType dtype, double v, void* p);

// Evaluates one node given its inputs' values.
HostTensor eval_node(const Node& n, const std::vector<const HostTensor*>& inputs);
// Evaluates the graph on the given inputs (one per graph input).
std::vector<HostTensor> interpret(const Graph& g, const std::vector<HostTensor>& inputs);

}  // namespace kiln::ir
