#include "ir/passes/fusion.h"

#include "support/check.h"

#include <algorithm>
#include <unordered_map>

namespace kiln::ir {

std::string_view group_kind_name(GroupKind k) {
  switch (k) {
    case GroupKind::elementwise:
      return "elementwise";
    case GroupKind::row_reduce:
      return "row_reduce";
    case GroupKind::matmul:
      return "matmul";
    case GroupKind::conv2d:
      return "conv2d";
  }
  return "?";
}

std::vector<int32_t> group_symbols(const FusionGroup& g) {
  std::vector<int32_t> syms;
  auto note = [&](const Shape& s) {
    for (const Dim& d : s)
      if (d.is_symbolic()) syms.push_back(d.sym);
  };
  for (const auto& n : g.leaves) note(n->shape);
  for (const auto& n : g.nodes) {
    note(n->shape);
    for (const auto& in : n->inputs) note(in->shape);
  }
  note(g.domain);
  std::sort(syms.begin(), syms.end());
  syms.erase(std::unique(syms.begin(), syms.end()), syms.end());
  return syms;
}

bool is_buffer_leaf(const Node& n) {
  return n.op == Op::Input || (n.op == Op::Constant && !n.shape.empty());
}

bool is_inline_constant(const Node& n) {
  if (n.op == Op::Constant) return n.shape.empty();
  if (is_view(n.op) || n.op == Op::Cast) return is_inline_constant(*n.inputs[0]);
  return false;
}

namespace {

// Views a matmul/conv kernel can read through with affine addressing.
bool is_affine_view(const Node& n) {
  if (n.op == Op::Permute || n.op == Op::Expand || n.op == Op::Slice) return true;
  // Only reshapes that insert or drop size-1 dims keep addressing affine per dim.
  return n.op == Op::Reshape && is_unit_reshape(n.shape, n.inputs[0]->shape);
}

Shape kept_shape(const Shape& domain, const std::vector<int64_t>& axes, bool keepdims) {
  Shape s;
  for (int64_t i = 0; i < static_cast<int64_t>(domain.size()); ++i) {
    bool reduced = std::binary_search(axes.begin(), axes.end(), i);
    if (!reduced)
      s.push_back(domain[i]);
    else if (keepdims)
      s.push_back(Dim::concrete(1));
  }
  return s;
}

// The most nodes one group absorbs; a longer chain is cut into several kernels, each storing its
// root for the next. Code generation walks a group's expression tree recursively (20000 fused ops
// overflowed the stack) and LLVM's time on one kernel grows faster than its size (1000 fused
// steps of tanh(x) * 0.5 + x, 3000 nodes: 35 s in one kernel).
constexpr size_t kMaxGroupNodes = 256;

struct Builder {
  std::vector<FusionGroup> groups;
  std::unordered_map<const Node*, int> group_of;
  std::vector<size_t> group_nodes;  // nodes absorbed by each group, its root included

  int new_group(const NodePtr& n) {
    FusionGroup g;
    g.root = n;
    if (n->op == Op::MatMul || n->op == Op::Conv2d) {
      g.kind = n->op == Op::MatMul ? GroupKind::matmul : GroupKind::conv2d;
      g.contraction = n;
    } else if (is_reduce(n->op)) {
      g.kind = GroupKind::row_reduce;
      g.domain = n->inputs[0]->shape;
      g.reduce_axes = n->attrs.axes;
      g.root_is_outer = true;
    } else {
      g.kind = GroupKind::elementwise;
    }
    groups.push_back(std::move(g));
    group_nodes.push_back(1);
    int id = static_cast<int>(groups.size()) - 1;
    group_of[n.get()] = id;
    return id;
  }

  // Whether group `gid` can compute `n` inline (all of n's users are in that group).
  bool can_absorb(int gid, const NodePtr& np) {
    const Node& n = *np;
    FusionGroup& g = groups[gid];
    bool contraction = n.op == Op::MatMul || n.op == Op::Conv2d;
    if (contraction && g.kind != GroupKind::elementwise) return false;
    switch (g.kind) {
      case GroupKind::matmul:
      case GroupKind::conv2d:
        return is_affine_view(n);
      case GroupKind::elementwise: {
        if (n.op == Op::MatMul || n.op == Op::Conv2d) {
          // The group becomes the contraction's epilogue: it must run over the contraction's
          // output, element for element (code generation rejects other index patterns).
          if (g.root->shape != n.shape) return false;
          g.kind = n.op == Op::MatMul ? GroupKind::matmul : GroupKind::conv2d;
          g.contraction = np;
          return true;
        }
        if (!is_reduce(n.op)) return true;
        const Shape& in = n.inputs[0]->shape;
        const Shape& root = g.root->shape;
        bool full = root == in;
        bool outer = root == kept_shape(in, n.attrs.axes, true) ||
                     root == kept_shape(in, n.attrs.axes, false);
        if (!full && !outer) return false;
        g.kind = GroupKind::row_reduce;
        g.domain = in;
        g.reduce_axes = n.attrs.axes;
        g.root_is_outer = !full;
        return true;
      }
      case GroupKind::row_reduce:
        if (!is_reduce(n.op)) return true;
        return n.inputs[0]->shape == g.domain && n.attrs.axes == g.reduce_axes;
    }
    return false;
  }
};

}  // namespace

FusionPlan fuse(const Graph& graph, const std::unordered_set<const Node*>& materialize) {
  std::vector<NodePtr> order = graph.topo_order();
  std::unordered_map<const Node*, std::vector<const Node*>> users;
  for (const NodePtr& n : order)
    for (const NodePtr& in : n->inputs) {
      auto& u = users[in.get()];
      if (std::find(u.begin(), u.end(), n.get()) == u.end()) u.push_back(n.get());
    }
  std::unordered_set<const Node*> outputs;
  for (const NodePtr& o : graph.outputs) outputs.insert(o.get());
  // Affine views read by several kernels: each of them reads through its own copy of the view
  // (as of an inline constant) instead of one kernel storing the view's elements for the others
  // (a transposed weight that two matmuls read would otherwise be copied, a shared bias
  // broadcast stored M x N and then read by epilogues that no longer see a bias).
  std::unordered_set<const Node*> inline_views;
  FusionPlan plan;
  std::unordered_map<const Node*, int> views_of_base;
  for (const Node* o : outputs) {
    const Node* base = o;
    while (base->op == Op::Reshape && is_unit_reshape(base->shape, base->inputs[0]->shape))
      base = base->inputs[0].get();
    // A base that is itself a view (of an input, say) has no kernel of its own to store it.
    if (base == o || is_buffer_leaf(*base) || is_inline_constant(*base) || is_view(base->op) ||
        outputs.count(base))
      continue;
    plan.output_views[o] = base;
    ++views_of_base[base];
  }
  for (auto it = plan.output_views.begin(); it != plan.output_views.end();)
    it = views_of_base[it->second] > 1 ? plan.output_views.erase(it) : std::next(it);

  Builder b;
  // Reverse topological order: every user of a node is placed before the node itself.
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const NodePtr& n = *it;
    bool leaf = is_buffer_leaf(*n);
    if (outputs.count(n.get())) {
      // Outputs are stored, even when they are leaves (a copy kernel), except output views,
      // which their base's kernel stores.
      if (!plan.output_views.count(n.get())) b.new_group(n);
      continue;
    }
    if (leaf || is_inline_constant(*n)) continue;  // read from buffers / emitted where used
    bool force = materialize.count(n.get()) > 0;
    const auto& us = users[n.get()];
    int gid = -1;
    bool same = !us.empty();
    for (const Node* u : us) {
      auto g = b.group_of.find(u);
      if (g == b.group_of.end()) {
        same = false;
        break;
      }
      if (gid == -1)
        gid = g->second;
      else if (gid != g->second)
        same = false;
    }
    // A node used by a matmul/conv directly or through views is read as a buffer unless it is an
    // affine view itself; anything with users in several kernels is stored once.
    if (!force && same && gid >= 0 && b.group_nodes[size_t(gid)] < kMaxGroupNodes &&
        b.can_absorb(gid, n)) {
      b.group_of[n.get()] = gid;
      ++b.group_nodes[size_t(gid)];
    } else if (!force && !us.empty() && is_affine_view(*n)) {
      inline_views.insert(n.get());
    } else if (!us.empty() || outputs.count(n.get())) {
      b.new_group(n);
    }
  }

  // Collect nodes and leaves per group, in topological order. Inline constants and inline views
  // join every group that uses them.
  std::unordered_map<const Node*, size_t> position;
  for (size_t i = 0; i < order.size(); ++i) position[order[i].get()] = i;
  for (const NodePtr& n : order) {
    auto g = b.group_of.find(n.get());
    if (g != b.group_of.end()) b.groups[g->second].nodes.push_back(n);
  }
  auto joins_users = [&](const Node& n) {
    return is_inline_constant(n) || inline_views.count(&n) > 0;
  };
  for (FusionGroup& g : b.groups) {
    std::unordered_set<const Node*> have;
    for (const NodePtr& n : g.nodes) have.insert(n.get());
    std::vector<NodePtr> joined;
    std::vector<NodePtr> stack;
    for (const NodePtr& n : g.nodes)
      for (const NodePtr& in : n->inputs)
        if (joins_users(*in)) stack.push_back(in);
    while (!stack.empty()) {
      NodePtr c = stack.back();
      stack.pop_back();
      if (!have.insert(c.get()).second) continue;
      joined.push_back(c);
      // An inline view's other inputs are buffers: leaves of the group.
      for (const NodePtr& in : c->inputs)
        if (joins_users(*in)) stack.push_back(in);
    }
    // They read only each other, leaves and constants: first, among themselves in topological
    // order, they keep the group's order topological.
    std::sort(joined.begin(), joined.end(), [&](const NodePtr& x, const NodePtr& y) {
      return position.at(x.get()) < position.at(y.get());
    });
    g.nodes.insert(g.nodes.begin(), joined.begin(), joined.end());
  }
  std::unordered_map<int, int> remap;
  // Execution order: a group runs after the groups of its leaves. Group ids were assigned in
  // reverse topological order of their roots, so running them in reverse id order works.
  for (int gid = static_cast<int>(b.groups.size()) - 1; gid >= 0; --gid) {
    FusionGroup& g = b.groups[gid];
    std::unordered_set<const Node*> in_group;
    for (const NodePtr& n : g.nodes) in_group.insert(n.get());
    std::unordered_set<const Node*> seen_leaf;
    for (const NodePtr& n : g.nodes) {
      if (is_buffer_leaf(*n) && !seen_leaf.count(n.get())) {
        seen_leaf.insert(n.get());
        g.leaves.push_back(n);
      }
      for (const NodePtr& in : n->inputs) {
        bool leaf = !in_group.count(in.get()) || is_buffer_leaf(*in);
        if (leaf && !seen_leaf.count(in.get())) {
          seen_leaf.insert(in.get());
          g.leaves.push_back(in);
        }
      }
    }
    KILN_CHECK(!g.nodes.empty() && g.nodes.back() == g.root) << "fusion: root not last";
    plan.groups.push_back(std::move(g));
  }
  return plan;
}

}  // namespace kiln::ir
