#include "ir/shape.h"

#include "support/check.h"

#include <algorithm>

namespace kiln::ir {

Shape concrete_shape(const std::vector<int64_t>& dims) {
  Shape s;
  s.reserve(dims.size());
  for (int64_t d : dims) s.push_back(Dim::concrete(d));
  return s;
}

std::vector<int64_t> concrete_dims(const Shape& s) {
  std::vector<int64_t> d;
  d.reserve(s.size());
  for (const Dim& x : s) d.push_back(x.is_symbolic() ? -1 : x.value);
  return d;
}

bool is_concrete(const Shape& s) {
  for (const Dim& d : s)
    if (d.is_symbolic()) return false;
  return true;
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (const Dim& d : s) {
    KILN_CHECK(!d.is_symbolic()) << "numel of a symbolic shape";
    n *= d.value;
  }
  return n;
}

int64_t numel(const Shape& s, const int64_t* dims) {
  int64_t n = 1;
  for (const Dim& d : s) n *= dim_value(d, dims);
  return n;
}

std::vector<int64_t> resolve_dims(const Shape& s, const int64_t* dims) {
  std::vector<int64_t> r;
  r.reserve(s.size());
  for (const Dim& d : s) r.push_back(dim_value(d, dims));
  return r;
}

int64_t concrete_product(const Shape& s) {
  int64_t n = 1;
  for (const Dim& d : s)
    if (!d.is_symbolic()) n *= d.value;
  return n;
}

std::vector<int32_t> symbols_of(const Shape& s) {
  std::vector<int32_t> r;
  for (const Dim& d : s)
    if (d.is_symbolic()) r.push_back(d.sym);
  std::sort(r.begin(), r.end());
  return r;
}

bool same_numel(const Shape& a, const Shape& b) {
  return symbols_of(a) == symbols_of(b) && concrete_product(a) == concrete_product(b);
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ",";
    out += s[i].is_symbolic() ? "s" + std::to_string(s[i].sym) : std::to_string(s[i].value);
  }
  return out + "]";
}

std::string dims_text(const std::vector<int64_t>& dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) out += (i ? "," : "") + std::to_string(dims[i]);
  return out + "]";
}

std::vector<int64_t> row_major_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> st(dims.size());
  int64_t acc = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    st[i] = acc;
    acc *= dims[i] > 0 ? dims[i] : 1;
  }
  return st;
}

bool is_unit_reshape(const Shape& out, const Shape& in,
                     std::vector<std::pair<size_t, size_t>>* pairs) {
  std::vector<std::pair<size_t, size_t>> found;
  size_t j = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (is_one(out[i])) continue;
    while (j < in.size() && is_one(in[j])) ++j;
    if (j == in.size() || in[j] != out[i]) return false;
    found.emplace_back(i, j++);
  }
  while (j < in.size() && is_one(in[j])) ++j;
  if (j != in.size()) return false;
  if (pairs) *pairs = std::move(found);
  return true;
}

bool broadcast_shapes(const Shape& a, const Shape& b, Shape& out) {
  size_t n = std::max(a.size(), b.size());
  out.assign(n, Dim::concrete(1));
  for (size_t i = 0; i < n; ++i) {
    const Dim* da = i < n - a.size() ? nullptr : &a[i - (n - a.size())];
    const Dim* db = i < n - b.size() ? nullptr : &b[i - (n - b.size())];
    bool a1 = !da || (!da->is_symbolic() && da->value == 1);
    bool b1 = !db || (!db->is_symbolic() && db->value == 1);
    if (a1)
      out[i] = db ? *db : Dim::concrete(1);
    else if (b1)
      out[i] = *da;
    else if (*da == *db)
      out[i] = *da;
    else
      return false;
  }
  return true;
}

}  // namespace kiln::ir
