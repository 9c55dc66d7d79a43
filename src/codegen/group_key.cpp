// describe_group: the canonical text of a fused group that the kernel cache key hashes.
#include "codegen/backend.h"

#include <kiln/dtype.h>

#include <cstdio>
#include <unordered_map>

namespace kiln {

DType temp_storage_dtype(DType t) { return (t == DType::f16 || t == DType::bf16) ? DType::f32 : t; }

std::string describe_group(const ir::FusionGroup& g, const std::vector<LeafLayout>& layouts,
                           DType out_storage) {
  std::unordered_map<const ir::Node*, std::string> name;
  std::string s = std::string(ir::group_kind_name(g.kind));
  if (g.kind == ir::GroupKind::row_reduce)
    s += " domain=" + ir::shape_str(g.domain) + " axes=" + ir::dims_text(g.reduce_axes) +
         (g.root_is_outer ? " outer" : " full");
  s += " out:" + std::string(dtype_name(out_storage)) + ";";
  for (size_t j = 0; j < g.leaves.size(); ++j) {
    const ir::Node& l = *g.leaves[j];
    name[&l] = "L" + std::to_string(j);
    s += " L" + std::to_string(j) + ":" + std::string(dtype_name(l.dtype)) +
         ir::shape_str(l.shape) + (layouts[j].runtime_strides ? "strided" : "dense");
    if (layouts[j].storage != l.dtype) s += " in " + std::string(dtype_name(layouts[j].storage));
    // Backends may bake constants into code (x86 prepacks constant weights): their content is
    // part of the key.
    if (l.op == ir::Op::Constant) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "#%016llx",
                    static_cast<unsigned long long>(l.attrs.data->hash));
      s += buf;
    }
    s += ";";
  }
  int id = 0;
  for (const auto& n : g.nodes) {
    if (name.count(n.get())) continue;
    std::string nm = "v" + std::to_string(id++);
    name[n.get()] = nm;
    s += " " + nm + "=" + std::string(ir::op_name(n->op)) + "(";
    for (size_t i = 0; i < n->inputs.size(); ++i) s += (i ? "," : "") + name[n->inputs[i].get()];
    s += "):" + std::string(dtype_name(n->dtype)) + ir::shape_str(n->shape);
    const ir::Attrs& a = n->attrs;
    if (!a.perm.empty()) s += " perm=" + ir::dims_text(a.perm);
    if (!a.axes.empty()) s += " axes=" + ir::dims_text(a.axes);
    if (!a.starts.empty())
      s += " starts=" + ir::dims_text(a.starts) + " steps=" + ir::dims_text(a.steps);
    if (n->op == ir::Op::Concat) s += " axis=" + std::to_string(a.axis);
    if (n->op == ir::Op::Conv2d)
      s += " conv=" +
           ir::dims_text({a.conv.stride[0], a.conv.stride[1], a.conv.padding[0], a.conv.padding[1],
                          a.conv.dilation[0], a.conv.dilation[1], a.conv.groups});
    if (n->op == ir::Op::Constant) {
      char buf[64];
      // Integers exactly: int64 values past 2^53 that share a double shared one key (and kernel).
      if (is_floating(n->dtype))
        std::snprintf(buf, sizeof buf, " value=%.17g", n->constant_at(0));
      else
        std::snprintf(buf, sizeof buf, " value=%lld",
                      static_cast<long long>(n->constant_int_at(0)));
      s += buf;
    }
    s += ";";
  }
  return s;
}

}  // namespace kiln
