// Entry's known signatures, Python int bounds and summed stats (jit_entry.h).
#include "jit_entry.h"

#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>

namespace kiln::py {

namespace {

inline bool is_aligned64(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 63) == 0; }

bool matches_known(const Entry::Known& k, std::span<const Array> in) {
  if (k.in.size() != in.size()) return false;
  for (size_t i = 0; i < in.size(); ++i) {
    const Entry::ArgKey& a = k.in[i];
    const Array& x = in[i];
    if (a.dtype != x.dtype() || a.shape != x.shape() || a.aligned != is_aligned64(x.data()) ||
        a.contiguous != x.is_contiguous())
      return false;
  }
  return true;
}

}  // namespace

const Entry::Known* find_known(Entry& e, std::span<const Array> in) {
  size_t n = e.known.size();
  if (n == 0) return nullptr;
  if (e.last_known < n && matches_known(e.known[e.last_known], in)) return &e.known[e.last_known];
  for (size_t i = 0; i < n; ++i)
    if (i != e.last_known && matches_known(e.known[i], in)) {
      e.last_known = i;
      return &e.known[i];
    }
  return nullptr;
}

void remember(Entry& e, std::span<const Array> in, const std::vector<Array>& outs) {
  Entry::Known k;
  k.in.reserve(in.size());
  for (const Array& x : in)
    k.in.push_back({x.dtype(), x.is_contiguous(), is_aligned64(x.data()), x.shape()});
  for (const Array& o : outs) {
    size_t bytes = static_cast<size_t>(o.numel()) * dtype_size(o.dtype());
    k.out.push_back({o.dtype(), o.shape(), bytes});
    k.out_bytes += bytes;
  }
  if (e.known.size() < kMaxKnown) {
    e.known.push_back(std::move(k));
    e.last_known = e.known.size() - 1;
  } else {
    e.last_known = e.next_replace;
    e.known[e.next_replace] = std::move(k);
    e.next_replace = (e.next_replace + 1) % kMaxKnown;
  }
}

void add_scalar_bounds(Entry& e, nb::handle notes, const std::vector<Tensor>& inputs) {
  for (nb::handle note : nb::cast<nb::list>(notes)) {
    auto t = nb::cast<nb::tuple>(note);
    Entry::ScalarBound b{nb::cast<size_t>(t[0]),
                         nb::cast<int64_t>(t[1]),
                         nb::cast<int64_t>(t[2]),
                         nb::cast<std::string>(t[3]),
                         {},
                         nb::borrow(t[4]),
                         nb::borrow(t[5]),
                         nb::borrow(t[6]),
                         nb::borrow(t[7])};
    for (const Tensor& in : inputs) b.inputs.push_back(in.dtype());
    auto same = std::find_if(e.scalar_bounds.begin(), e.scalar_bounds.end(),
                             [&](const Entry::ScalarBound& o) {
                               return o.arg == b.arg && o.inputs == b.inputs && o.m.equal(b.m) &&
                                      o.c.equal(b.c) && o.expr.equal(b.expr);
                             });
    if (same == e.scalar_bounds.end()) {
      e.scalar_bounds.push_back(std::move(b));
      ++e.scalar_bounds_version;
    } else if (b.lo >= same->lo && b.hi <= same->hi && (b.lo != same->lo || b.hi != same->hi)) {
      *same = std::move(b);
      ++e.scalar_bounds_version;
    }
  }
}

nb::dict stats_of(const std::vector<std::unique_ptr<Entry>>& entries) {
  Stats total;
  for (const auto& e : entries) {
    Stats s = e->fn->stats();
    total.calls += s.calls;
    total.compiles += s.compiles;
    total.memory_hits += s.memory_hits;
    total.kernel_memory_hits += s.kernel_memory_hits;
    total.disk_hits += s.disk_hits;
    total.variants += s.variants;
    total.variant_limit_hits += s.variant_limit_hits;
    total.fallbacks += s.fallbacks;
    for (const auto& [k, v] : s.backend_kernels) total.backend_kernels[k] += v;
    total.recompile_reasons.insert(total.recompile_reasons.end(), s.recompile_reasons.begin(),
                                   s.recompile_reasons.end());
    total.fallback_reasons.insert(total.fallback_reasons.end(), s.fallback_reasons.begin(),
                                  s.fallback_reasons.end());
  }
  nb::dict d;
  d["calls"] = total.calls;
  d["compiles"] = total.compiles;
  d["memory_hits"] = total.memory_hits;  // calls served by an executable already in memory
  d["kernel_memory_hits"] = total.kernel_memory_hits;  // kernels a compile found in memory
  d["disk_hits"] = total.disk_hits;
  d["variants"] = total.variants;
  d["variant_limit_hits"] = total.variant_limit_hits;
  d["fallbacks"] = total.fallbacks;
  d["backend_kernels"] = total.backend_kernels;
  d["recompile_reasons"] = total.recompile_reasons;
  d["fallback_reasons"] = total.fallback_reasons;
  d["traces"] = static_cast<int64_t>(entries.size());
  return d;
}

}  // namespace kiln::py
