// The reference interpreter: runs any graph op by op in plain C++, float values held as doubles and
// integer ones exactly (see HostTensor). It is the oracle of the differential tests and of constant
// folding, and is never a silent fallback for failed compiles.
#pragma once

#include "ir/host_tensor.h"
#include "ir/node.h"

#include <vector>

namespace kiln::ir {

// Evaluates one node given its inputs' values.
HostTensor eval_node(const Node& n, const std::vector<const HostTensor*>& inputs);
// Evaluates the graph on the given inputs (one per graph input).
std::vector<HostTensor> interpret(const Graph& g, const std::vector<HostTensor>& inputs);

}  // namespace kiln::ir
