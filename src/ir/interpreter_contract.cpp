// The reference interpreter's ops with a reduction inside: sums, means, max and min over axes,
// matmul and conv2d. Floats accumulate in double; integers exactly, wrapping modulo 2^64 (the
// result is wrapped to its dtype by eval_node).
#include "ir/interpreter_ops.h"

#include "support/check.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kiln::ir::interp {

namespace {

// Products and sums of contractions: in double for floats, wrapping for integers.
double multiply_add(double acc, double x, double y) { return acc + x * y; }
int64_t multiply_add(int64_t acc, int64_t x, int64_t y) {
  return wrapping_add(acc, wrapping_mul(x, y));
}

}  // namespace

void eval_reduce(const Node& n, const HostTensor& in, HostTensor& out) {
  const std::vector<int64_t> in_strides = row_major_strides(in.shape);
  std::vector<int64_t> red_dims(in.shape.size(), 1);
  for (int64_t ax : n.attrs.axes) red_dims[ax] = in.shape[ax];
  const int64_t count = element_count(red_dims);
  KILN_CHECK(count > 0 || n.op == Op::ReduceSum || n.op == Op::ReduceMean)
      << "interpreter: " << op_name(n.op) << " over a zero-size axis has no identity";
  // Offsets of one reduction window, relative to its first element (computed once).
  std::vector<int64_t> window;
  window.reserve(static_cast<size_t>(count));
  for_each_offset(red_dims, in_strides, 0, [&](int64_t off) { window.push_back(off); });

  const Op op = n.op;
  if (holds_ints(in.dtype) && op != Op::ReduceMean) {  // exact: sums wrap, max and min compare
    out.ints.resize(static_cast<size_t>(out.numel()));
    int64_t* o = out.ints.data();
    const int64_t* src = in.ints.data();
    for_each_offset(out.shape, in_strides, 0, [&](int64_t base) {
      const int64_t* p = src + base;
      int64_t acc = op == Op::ReduceSum ? 0 : p[window[0]];
      for (int64_t w : window) {
        const int64_t x = p[w];
        acc = op == Op::ReduceSum   ? wrapping_add(acc, x)
              : op == Op::ReduceMax ? std::max(acc, x)
                                    : std::min(acc, x);
      }
      *o++ = acc;
    });
    return;
  }
  out.values.resize(static_cast<size_t>(out.numel()));
  double* o = out.values.data();
  const double* src = in.values.data();
  for_each_offset(out.shape, in_strides, 0, [&](int64_t base) {
    const double* p = src + base;
    double acc;
    if (op == Op::ReduceSum || op == Op::ReduceMean) {
      acc = 0;
      for (int64_t w : window) acc += p[w];
      if (op == Op::ReduceMean)
        acc = count == 0 ? std::numeric_limits<double>::quiet_NaN() : acc / count;
    } else {
      const bool is_max = op == Op::ReduceMax;
      acc = p[window[0]];
      for (size_t i = 1; i < window.size() && !std::isnan(acc); ++i) {
        const double x = p[window[i]];
        if (std::isnan(x) || (is_max ? x > acc : x < acc)) acc = x;
      }
    }
    *o++ = acc;
  });
}

// A [..., M, K] x B [..., K, N], equal batch dims, accumulated in double (or exactly, wrapping,
// for integers). The i-k-j loop order keeps rows in cache and still adds each output's terms in
// k order.
void eval_matmul(const HostTensor& a, const HostTensor& b, HostTensor& out) {
  const size_t r = a.shape.size();
  const int64_t m = a.shape[r - 2], k = a.shape[r - 1], n = b.shape[r - 1];
  const int64_t batch = element_count(std::vector<int64_t>(a.shape.begin(), a.shape.end() - 2));
  with_element_type(a, [&](auto t) {
    using T = decltype(t);
    auto& o = elements(out, t);
    o.assign(static_cast<size_t>(out.numel()), T{0});
    for (int64_t bi = 0; bi < batch; ++bi) {
      const T* pa = elements(a, t).data() + bi * m * k;
      const T* pb = elements(b, t).data() + bi * k * n;
      T* po = o.data() + bi * m * n;
      for (int64_t i = 0; i < m; ++i) {
        T* orow = po + i * n;
        for (int64_t kk = 0; kk < k; ++kk) {
          const T av = pa[i * k + kk];
          const T* brow = pb + kk * n;
          for (int64_t j = 0; j < n; ++j) orow[j] = multiply_add(orow[j], av, brow[j]);
        }
      }
    }
  });
}

// x [N, C, H, W] (*) w [O, C/groups, KH, KW] -> [N, O, OH, OW], zero padding.
void eval_conv2d(const Node& node, const HostTensor& x, const HostTensor& w, HostTensor& out) {
  const Conv2dParams& p = node.attrs.conv;
  const int64_t n = x.shape[0], c = x.shape[1], h = x.shape[2], wd = x.shape[3];
  const int64_t o = w.shape[0], cg = w.shape[1], kh = w.shape[2], kw = w.shape[3];
  const int64_t oh = out.shape[2], ow = out.shape[3];
  const int64_t og = o / p.groups;
  with_element_type(x, [&](auto t) {
    using T = decltype(t);
    auto& result = elements(out, t);
    result.resize(static_cast<size_t>(out.numel()));
    T* po = result.data();
    for (int64_t ni = 0; ni < n; ++ni)
      for (int64_t oi = 0; oi < o; ++oi) {
        const int64_t c0 = (oi / og) * cg;
        for (int64_t y = 0; y < oh; ++y)
          for (int64_t xo = 0; xo < ow; ++xo) {
            T acc = 0;
            for (int64_t ci = 0; ci < cg; ++ci) {
              const T* px = elements(x, t).data() + (ni * c + c0 + ci) * h * wd;
              const T* pw = elements(w, t).data() + (oi * cg + ci) * kh * kw;
              for (int64_t ky = 0; ky < kh; ++ky) {
                const int64_t iy = y * p.stride[0] - p.padding[0] + ky * p.dilation[0];
                if (iy < 0 || iy >= h) continue;
                for (int64_t kx = 0; kx < kw; ++kx) {
                  const int64_t ix = xo * p.stride[1] - p.padding[1] + kx * p.dilation[1];
                  if (ix < 0 || ix >= wd) continue;
                  acc = multiply_add(acc, px[iy * wd + ix], pw[ky * kw + kx]);
                }
              }
            }
            *po++ = acc;
          }
      }
  });
}

}  // namespace kiln::ir::interp
