// Fusion grouping: partitions an optimized graph into kernels. Chains of elementwise, broadcast
// and view ops fuse with each other and into the reduction or store that consumes them; a row
// kernel holds every reduction over the same domain and axes together with the elementwise work
// around them, so softmax or layer_norm read their input from memory once. Matmul and conv2d are
// kernels of their own whose operands may be views of buffers.
#pragma once

#include "ir/node.h"

#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace kiln::ir {

enum class GroupKind : uint8_t { elementwise, row_reduce, matmul, conv2d };
std::string_view group_kind_name(GroupKind k);

struct FusionGroup {
  GroupKind kind = GroupKind::elementwise;
  NodePtr root;                 // the value this kernel stores (to a temp or an output buffer)
  std::vector<NodePtr> nodes;   // nodes computed inside the kernel, inputs before users, root last
  std::vector<NodePtr> leaves;  // values read from buffers: inputs, constants, other kernels' roots
  // row_reduce: the shape the reductions run over and their (sorted) axes; root_is_outer when the
  // root has the reduced shape rather than the full domain.
  Shape domain;
  std::vector<int64_t> reduce_axes;
  bool root_is_outer = false;
  // matmul/conv2d: the contraction node; the root is either it or the last node of an
  // elementwise epilogue applied to its output (bias, activation, residual, ...).
  NodePtr contraction;
};

struct FusionPlan {
  std::vector<FusionGroup> groups;  // in execution order
  // Outputs that only add or drop size-1 dims of a computed value (a 1-d operand's matmul, as
  // traced: [1, N] -> [N]), mapped to that value: its kernel stores straight into the output
  // (the same elements in the same order), with no copy kernel. Not for a value that is itself an
  // output, or that another output views too.
  std::unordered_map<const Node*, const Node*> output_views;
};

// `materialize` forces nodes to be roots of their own kernels (used when code generation finds
// a reduction whose result is not indexed along its kernel's rows).
FusionPlan fuse(const Graph& g, const std::unordered_set<const Node*>& materialize = {});

// The symbols (sorted, unique) in the shapes a group's kernel deals with: its nodes, their inputs,
// its leaves and its domain. What the kernel loads and what its cache key states facts about.
std::vector<int32_t> group_symbols(const FusionGroup& g);

// True for nodes read from buffers rather than computed (inputs and non-scalar constants).
bool is_buffer_leaf(const Node& n);
// True for scalar constants and views/casts of them: emitted inline wherever used.
bool is_inline_constant(const Node& n);

}  // namespace kiln::ir
