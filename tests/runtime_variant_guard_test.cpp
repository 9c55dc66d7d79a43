// Unit tests of variant guards and the shape policy: binding symbols from a call (>= 2, multiples
// of 16, equal wherever a symbol occurs), making symbols exact, and the policy's decisions
// (automatic, symbolic, per-argument, the bound's most general variant, pinning, persistence).
#include "jit/shape_policy.h"
#include "jit/variant_guard.h"

#include <catch2/catch.hpp>

#include <vector>

using kiln::Array;
using kiln::ir::Dim;

namespace {

float g_buf[4096];

Array arr(std::vector<int64_t> shape, std::vector<int64_t> strides = {}) {
  return Array::view(g_buf, std::move(shape), kiln::f32, std::move(strides));
}

kiln::ArgGuard arg(kiln::ir::Shape dims, bool contiguous = true) {
  kiln::ArgGuard a;
  a.dims = std::move(dims);
  a.contiguous = contiguous;
  return a;
}

}  // namespace

TEST_CASE("a guard binds its symbols and checks every relation", "[guard]") {
  kiln::VariantGuard g;
  g.args = {arg({Dim::symbol(0), Dim::concrete(8)}), arg({Dim::symbol(0)}), arg({Dim::symbol(1)})};
  g.facts = {{false}, {true}};
  int64_t dims[2];
  REQUIRE(g.bind(std::vector<Array>{arr({5, 8}), arr({5}), arr({32})}, dims));
  CHECK(dims[0] == 5);
  CHECK(dims[1] == 32);
  // An exact dim that differs, a symbol bound twice to different extents, a symbol below 2, a
  // multiple-of-16 fact broken, another dtype or rank, another stride class: all fail.
  CHECK_FALSE(g.bind(std::vector<Array>{arr({5, 9}), arr({5}), arr({32})}, dims));
  CHECK_FALSE(g.bind(std::vector<Array>{arr({5, 8}), arr({6}), arr({32})}, dims));
  CHECK_FALSE(g.bind(std::vector<Array>{arr({1, 8}), arr({1}), arr({32})}, dims));
  CHECK_FALSE(g.bind(std::vector<Array>{arr({0, 8}), arr({0}), arr({32})}, dims));
  CHECK_FALSE(g.bind(std::vector<Array>{arr({5, 8}), arr({5}), arr({33})}, dims));
  CHECK_FALSE(g.bind(std::vector<Array>{arr({5, 8}), arr({5, 1}), arr({32})}, dims));
  CHECK_FALSE(g.bind(std::vector<Array>{arr({5, 8}, {16, 1}), arr({5}), arr({32})}, dims));
  CHECK_FALSE(g.bind(std::vector<Array>{arr({5, 8}), arr({5})}, dims));
  Array i32 = Array::view(g_buf, {5}, kiln::i32);
  CHECK_FALSE(g.bind(std::vector<Array>{arr({5, 8}), i32, arr({32})}, dims));
  CHECK(g.str() == "float32[s0,8] float32[s0] float32[s1]; s0>=2, s1>=2%16");
}

TEST_CASE("keep_symbols makes symbols exact and renumbers the rest", "[guard]") {
  kiln::VariantGuard g;
  g.args = {arg({Dim::symbol(0), Dim::symbol(1)}), arg({Dim::symbol(1), Dim::symbol(2)})};
  g.facts = {{false}, {false}, {true}};
  std::vector<Array> call = {arr({3, 4}), arr({4, 16})};
  kiln::VariantGuard k = kiln::keep_symbols(g, call, {false, true, true});
  CHECK(k.str() == "float32[3,s0] float32[s0,s1]; s0>=2, s1>=2%16");
  kiln::VariantGuard none = kiln::keep_symbols(g, call, {false, false, false});
  CHECK(none.is_exact());
  CHECK(none.str() == "float32[3,4] float32[4,16]");
  CHECK(k.specificity() < none.specificity());
}

TEST_CASE("the automatic policy: exact first, symbolic once a dim changes", "[policy]") {
  kiln::Options o;  // automatic
  kiln::ShapePolicy p(o);
  auto d1 = p.decide(std::vector<Array>{arr({37, 64}), arr({64})}, false);
  CHECK(d1.guard.is_exact());
  CHECK(d1.reasons.empty());
  auto d2 = p.decide(std::vector<Array>{arr({41, 64}), arr({64})}, false);
  CHECK(d2.guard.str() == "float32[s0,64] float32[64]; s0>=2");
  REQUIRE(d2.reasons.size() == 1);
  CHECK(d2.reasons[0] == "arg 0 dim 0: 37 -> 41, now symbolic");
  CHECK(d2.settled_changed);
  // A 1 in a symbolic dim is exact in its own variant.
  auto d3 = p.decide(std::vector<Array>{arr({1, 64}), arr({64})}, false);
  CHECK(d3.guard.is_exact());
  // The bound: the most general variant, every dim of at least 2 a symbol, no facts.
  auto d4 = p.decide(std::vector<Array>{arr({32, 64}), arr({64})}, true);
  CHECK(d4.guard.str() == "float32[s0,s1] float32[s1]; s0>=2, s1>=2");
  // Pinned dims stay exact; the settled decisions round-trip into a new policy.
  p.pin(d2.guard, {true}, std::vector<Array>{arr({41, 64}), arr({64})}, "test");
  auto d5 = p.decide(std::vector<Array>{arr({50, 64}), arr({64})}, false);
  CHECK(d5.guard.is_exact());
  kiln::ShapePolicy q(o);
  auto saved_before_pin = std::string("kiln shape decisions 1\n0 0 2 0\n");
  q.restore(saved_before_pin, std::vector<Array>{arr({9, 64}), arr({64})});
  CHECK(q.decide(std::vector<Array>{arr({9, 64}), arr({64})}, false).guard.str() ==
        "float32[s0,64] float32[64]; s0>=2");
  CHECK(p.settled() == "kiln shape decisions 1\n");  // the pinned dim is not saved
  // Decisions saved for other ranks are ignored.
  kiln::ShapePolicy r(o);
  r.restore(saved_before_pin, std::vector<Array>{arr({9, 64, 2}), arr({64})});
  CHECK(r.decide(std::vector<Array>{arr({9, 64, 2}), arr({64})}, false).guard.is_exact());
}

TEST_CASE("symbolic and per-argument policies, multiples of 16", "[policy]") {
  kiln::Options all;
  all.dynamic = kiln::DynamicMode::symbolic;
  kiln::ShapePolicy p(all);
  // Equal extents share a symbol; 32 and 64 are multiples of 16.
  auto d = p.decide(std::vector<Array>{arr({32, 64}), arr({64, 32})}, false);
  CHECK(d.guard.str() == "float32[s0,s1] float32[s1,s0]; s0>=2%16, s1>=2%16");
  auto e = p.decide(std::vector<Array>{arr({33, 64}), arr({64, 33})}, false);
  CHECK(e.guard.str() == "float32[s0,s1] float32[s1,s0]; s0>=2, s1>=2%16");

  kiln::Options per;
  per.dynamic = kiln::DynamicMode::per_arg;
  per.dynamic_dims[1] = {-1};
  kiln::ShapePolicy q(per);
  CHECK(q.decide(std::vector<Array>{arr({5, 6}), arr({6, 7})}, false).guard.str() ==
        "float32[5,6] float32[6,s0]; s0>=2");

  kiln::Options exact;
  exact.dynamic = kiln::DynamicMode::exact;
  kiln::ShapePolicy r(exact);
  for (int64_t n : {5, 6, 7})
    CHECK(r.decide(std::vector<Array>{arr({n, 6})}, false).guard.is_exact());
}
