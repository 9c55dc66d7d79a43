// The dispatch hit path: the last exact variant that served is tried before the table, so calls
// that alternate between signatures (shapes, dtypes, contiguous vs strided views of one shape)
// must still each reach their own variant; every call is counted.
#include <catch2/catch.hpp>

#include <kiln/kiln.h>

#include <vector>
#include "needs_llvm.h"

TEST_CASE("jit dispatch: alternating signatures each reach their own variant",
          "[jit][dispatch]" KILN_NEEDS_LLVM) {
  kiln::Options o;
  o.dynamic = kiln::DynamicMode::exact;
  kiln::Function f = kiln::jit([](kiln::Tensor x) { return x * 2.0f + 1.0f; }, o);
  std::vector<float> buf(64);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = float(i);
  std::vector<double> dbuf(buf.begin(), buf.end());
  // Same shape [4, 8]: contiguous, and every other element of a [4, 16] buffer (strided).
  const std::vector<kiln::Array> args = {
      kiln::Array::view(buf.data(), {4, 8}, kiln::f32),
      kiln::Array::view(buf.data(), {8, 4}, kiln::f32),
      kiln::Array::view(buf.data(), {4, 8}, kiln::f32, {16, 2}),
      kiln::Array::view(dbuf.data(), {4, 8}, kiln::f64),
  };
  int64_t calls = 0;
  for (int round = 0; round < 3; ++round) {
    for (const kiln::Array& a : args) {
      std::vector<kiln::Array> out = f({a});
      ++calls;
      REQUIRE(out.size() == 1);
      CHECK(out[0].shape() == a.shape());
      CHECK(out[0].dtype() == a.dtype());
      for (int64_t i = 0; i < a.shape()[0]; ++i)
        for (int64_t j = 0; j < a.shape()[1]; ++j) {
          const int64_t at = i * a.strides()[0] + j * a.strides()[1];
          const int64_t o = i * a.shape()[1] + j;
          const double want = (a.dtype() == kiln::f32 ? buf[at] : dbuf[at]) * 2 + 1;
          const double got =
              a.dtype() == kiln::f32 ? out[0].data<float>()[o] : out[0].data<double>()[o];
          CHECK(got == want);
        }
    }
  }
  const kiln::Stats s = f.stats();
  CHECK(s.calls == calls);
  CHECK(s.compiles == int64_t(args.size()));
  CHECK(s.memory_hits == calls - int64_t(args.size()));
}
