// Catch2's runner for every test binary. A test binary run by hand sees what ctest gives it
// (tests/CMakeLists.txt): no disk cache unless KILN_CACHE or KILN_CACHE_DIR says otherwise, so
// that kernels and shape decisions left in the user's default cache directory by earlier runs do
// not change what the tests count (compiles, traces, recompile reasons). Probe children that
// tests spawn always set KILN_CACHE_DIR, and keep the cache their test gives them. In a build
// without LLVM it says how many test cases it hides for that (tests/needs_llvm.h).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

int main(int argc, char* argv[]) {
  if (std::getenv("KILN_CACHE") == nullptr && std::getenv("KILN_CACHE_DIR") == nullptr)
    setenv("KILN_CACHE", "off", /*overwrite=*/0);
#ifndef KILN_WITH_LLVM
  const auto& all = Catch::getRegistryHub().getTestCaseRegistry().getAllTests();
  const auto hidden = std::count_if(all.begin(), all.end(), [](const Catch::TestCase& t) {
    return std::find(t.tags.begin(), t.tags.end(), "llvm") != t.tags.end();
  });
  if (hidden > 0)
    std::fprintf(stderr,
                 "kiln was built without LLVM (-DKILN_WITH_LLVM=OFF): %ld test cases that need "
                 "it are hidden ([.llvm]) and skipped\n",
                 long(hidden));
#endif
  return Catch::Session().run(argc, argv);
}
