// Catch2's runner for every test binary. A test binary run by hand sees what ctest gives it
// (tests/CMakeLists.txt): no disk cache unless KILN_CACHE or KILN_CACHE_DIR says otherwise, so
// that kernels and shape decisions left in the user's default cache directory by earlier runs do
// not change what the tests count (compiles, traces, recompile reasons). Probe children that
// tests spawn always set KILN_CACHE_DIR, and keep the cache their test gives them.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdlib>

int main(int argc, char* argv[]) {
  if (std::getenv("KILN_CACHE") == nullptr && std::getenv("KILN_CACHE_DIR") == nullptr)
    setenv("KILN_CACHE", "off", /*overwrite=*/0);
  return Catch::Session().run(argc, argv);
}
