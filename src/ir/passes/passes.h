// The graph passes, one per file, each a pure function Graph -> Graph.
// pipeline.cpp runs them in order (see run_pipeline), logging and timing each under KILN_LOG=debug.
#pragma once

#include "ir/node.h"

namespace kiln::ir {

// Checks the invariants of every node (shapes, dtypes, attrs); throws CompileError naming the node.
void verify(const Graph& g);
// "%3 = add(%1, %2) : f32[4,8]" lines, inputs first, then "return %7, %9".
std::string print(const Graph& g);
namespace detail {
// One node's printed line (shared by the printer and the verifier's messages).
std::string print_node_line(const Graph& g, const Node& n);
}  // namespace detail

// W @ v as v^T @ W^T, and unit reshapes of matmuls sunk below the elementwise ops after them.
Graph vector_matmul(const Graph& g);
Graph split_reductions(const Graph& g);  // a whole large tensor's reduction in two steps
Graph simplify(const Graph& g);       // x*1, x+0, x-0, x/1, double permute, reshape of reshape, ...
Graph constant_fold(const Graph& g);  // nodes whose inputs are all (small) constants
Graph cse(const Graph& g);            // structurally equal nodes become one
Graph dce(const Graph& g);            // rebuilds from the outputs

// vector_matmul, simplify, constant_fold, cse, dce (to a fixed point, bounded), with verify between
// passes in debug builds.
Graph run_pipeline(const Graph& g);

}  // namespace kiln::ir
