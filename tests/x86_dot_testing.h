// Shared by the dot path's tests (x86_dot_test.cpp, x86_dot_routing_test.cpp): a case checked
// against the reference on every pool, after checking the path its plan takes.
#pragma once

#include "x86_gemm_testing.h"

#include <catch2/catch.hpp>

#include "codegen/x86/blocking.h"
#include "codegen/x86/cpu_info.h"
#include "codegen/x86/gemm_plan.h"

#include <string>

namespace kiln::x86::testing {

// A plan for c's problem on `threads` threads, checked on every pool; it must take `path`. A
// "dot" case whose K is too short for the dot path to pay (dot_path_for; its bounds are checked
// on their own below) must take another path, and is checked there; one the dot path may take
// instead of the packed path (dot_path_for's instead_of_packed) either.
inline double check_case(Case& c, Isa isa, int threads, const char* path,
                         const CacheSizes* caches = nullptr) {
  auto plan = caches ? GemmPlan::make(c.problem(), isa, threads, false, *caches)
                     : GemmPlan::make(c.problem(), isa, threads);
  const std::string taken = path_taken(*plan, c, pool2());
  const CacheSizes& plan_caches = caches ? *caches : host_cpu().caches;
  if (std::string(path) == "dot" &&
      dot_path_for(c.problem(), isa, false, plan_caches) == DotOver::none) {
    if (dot_path_for(c.problem(), isa, false, plan_caches, true) == DotOver::none)
      CHECK(taken != "dot");
  } else {
    CHECK(taken == path);
  }
  return worst_on_every_pool(*plan, c);
}

}  // namespace kiln::x86::testing
