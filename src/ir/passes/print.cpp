// The IR text printer: one line per node in topological order, numbered by that order, so that
// structurally equal graphs print identically (golden tests, KILN_DUMP, JitFunction.inspect).
#include "ir/passes/passes.h"

#include <fmt/format.h>

#include <cmath>
#include <string>
#include <unordered_map>

namespace kiln::ir {

namespace {

// Constants with at most this many elements print their values; larger ones print their hash.
constexpr int64_t kMaxInlineElements = 8;

std::string_view dtype_short_name(DType t) {
  switch (t) {
    case DType::f32:
      return "f32";
    case DType::f64:
      return "f64";
    case DType::f16:
      return "f16";
    case DType::bf16:
      return "bf16";
    case DType::i8:
      return "i8";
    case DType::i32:
      return "i32";
    case DType::i64:
      return "i64";
    case DType::boolean:
      return "bool";
  }
  return "?";
}

// Shortest text that reads back as the same value of `dtype`; floats always show a '.' or an
// exponent so that `1.0 : f32` and `1 : i32` are told apart.
std::string value_str(double v, DType dtype) {
  if (dtype == DType::boolean) return v != 0 ? "true" : "false";
  if (!is_floating(dtype)) return fmt::format("{}", static_cast<int64_t>(v));
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::string s =
      dtype == DType::f64 ? fmt::format("{}", v) : fmt::format("{}", static_cast<float>(v));
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string constant_str(const Node& n) {
  const auto& data = n.attrs.data;
  if (!data) return "<no data>";
  const int64_t count = static_cast<int64_t>(data->bytes.size() / dtype_size(n.dtype));
  // A node with a malformed payload (which verify rejects) must still print safely.
  const bool well_formed =
      is_concrete(n.shape) && data->bytes.size() == numel(n.shape) * dtype_size(n.dtype);
  if (well_formed && n.shape.empty()) return value_str(n.constant_at(0), n.dtype);
  if (well_formed && count <= kMaxInlineElements) {
    std::string s = "[";
    for (int64_t i = 0; i < count; ++i) {
      if (i) s += ", ";
      s += value_str(n.constant_at(i), n.dtype);
    }
    return s + "]";
  }
  return fmt::format("<hash {:016x}, {} elements>", data->hash, count);
}

std::string attrs_str(const Node& n) {
  const Attrs& a = n.attrs;
  switch (n.op) {
    case Op::Permute:
      return " perm=" + dims_text(a.perm);
    case Op::Slice:
      return " starts=" + dims_text(a.starts) + " steps=" + dims_text(a.steps);
    case Op::Concat:
      return fmt::format(" axis={}", a.axis);
    case Op::Conv2d: {
      const Conv2dParams& c = a.conv;
      return fmt::format(" stride=[{},{}] padding=[{},{}] dilation=[{},{}] groups={}", c.stride[0],
                         c.stride[1], c.padding[0], c.padding[1], c.dilation[0], c.dilation[1],
                         c.groups);
    }
    default:
      break;
  }
  if (is_reduce(n.op)) return " axes=" + dims_text(a.axes);
  return "";
}

using Numbering = std::unordered_map<const Node*, size_t>;

std::string operand_str(const Node* n, const Numbering& ids) {
  auto it = ids.find(n);
  return it == ids.end() ? std::string("%?") : fmt::format("%{}", it->second);
}

std::string node_line(const Node& n, const Numbering& ids) {
  std::string line = operand_str(&n, ids);
  line += " = ";
  line += op_name(n.op);
  if (n.op == Op::Input) {
    line += fmt::format("[arg={}]", n.attrs.arg);
  } else if (n.op == Op::Constant) {
    line += " " + constant_str(n);
  } else {
    line += "(";
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (i) line += ", ";
      line += operand_str(n.inputs[i].get(), ids);
    }
    line += ")";
    line += attrs_str(n);
  }
  line += fmt::format(" : {}{}", dtype_short_name(n.dtype), shape_str(n.shape));
  if (n.tag != Composite::none) line += fmt::format(" #{}", composite_name(n.tag));
  return line;
}

Numbering number_nodes(const std::vector<NodePtr>& order) {
  Numbering ids;
  ids.reserve(order.size());
  for (size_t i = 0; i < order.size(); ++i) ids.emplace(order[i].get(), i);
  return ids;
}

}  // namespace

namespace detail {
// The printed line of one node of `g`, numbered as print(g) numbers it (verify's error messages).
std::string print_node_line(const Graph& g, const Node& n) {
  return node_line(n, number_nodes(g.topo_order()));
}
}  // namespace detail

std::string print(const Graph& g) {
  const std::vector<NodePtr> order = g.topo_order();
  const Numbering ids = number_nodes(order);
  std::string out;
  for (const NodePtr& n : order) {
    out += node_line(*n, ids);
    out += '\n';
  }
  out += "return";
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    out += i ? ", " : " ";
    out += operand_str(g.outputs[i].get(), ids);
  }
  out += '\n';
  return out;
}

}  // namespace kiln::ir
