// Whether caller-owned outputs share memory with the inputs of the same call (an update in
// place: h = h + f(h) written into h). Kernels may write an output before they have read all of
// an input (a GEMM's K split or transposed path writes C before it adds the residual), so such
// a call runs into fresh outputs and copies them over (function.cpp).
#pragma once

#include <kiln/array.h>

#include <span>

namespace kiln {

// True when any output's bytes overlap any input's (the spans from the lowest to the highest
// element address; arrays without elements overlap nothing). input_bytes, where given, holds per
// input the bytes a contiguous one spans from its data pointer (-1: strided, its span computed).
bool outputs_overlap_inputs(std::span<const Array> inputs, std::span<const Array> outputs,
                            const int64_t* input_bytes = nullptr);

}  // namespace kiln
