#include "cache/key.h"
#include "cache/memory_cache.h"
#include "jit/device.h"
#include "jit/signature.h"

#include <catch2/catch.hpp>

using kiln::cache::CacheKey;
using kiln::cache::KeyBuilder;

TEST_CASE("cache keys are length-prefixed: moving a byte between fields changes the key", "[key]") {
  CacheKey a = KeyBuilder().add("x", "ab").add("y", "c").finish();
  CacheKey b = KeyBuilder().add("x", "a").add("y", "bc").finish();
  CacheKey c = KeyBuilder().add("x", "ab").add("y", "c").finish();
  REQUIRE_FALSE(a == b);
  REQUIRE(a == c);
  REQUIRE(a.hex().size() == 32);
}

TEST_CASE("a manifest round-trips and re-derives the same digest", "[key]") {
  CacheKey k = KeyBuilder()
                   .add("kiln", "0.1.0")
                   .add("group", "elementwise; L0:float32[4]")
                   .add("n", int64_t{7})
                   .finish();
  std::vector<std::pair<std::string, std::string>> fields;
  REQUIRE(kiln::cache::parse_manifest(k.manifest(), fields));
  REQUIRE(fields == k.fields);
  REQUIRE(kiln::cache::digest_fields(fields) == k.digest);
  REQUIRE_FALSE(kiln::cache::parse_manifest("no colon here\n", fields));
  REQUIRE_FALSE(kiln::cache::parse_manifest("a: b", fields));  // no final newline
}

namespace {
struct CountedKernel : kiln::CompiledKernel {
  explicit CountedKernel(int* live) : live_(live) { ++*live_; }
  ~CountedKernel() override { --*live_; }
  int* live_;
};
}  // namespace

TEST_CASE("memory cache evicts least recently used and frees unreferenced kernels",
          "[memory_cache]") {
  int live = 0;
  kiln::cache::MemoryCache mc(2, 1 << 30);
  auto key = [](int i) { return KeyBuilder().add("i", int64_t{i}).finish(); };
  mc.put(key(1), std::make_shared<CountedKernel>(&live));
  mc.put(key(2), std::make_shared<CountedKernel>(&live));
  REQUIRE(mc.get(key(1)) != nullptr);  // 1 is now most recent
  mc.put(key(3), std::make_shared<CountedKernel>(&live));
  REQUIRE(mc.get(key(2)) == nullptr);  // 2 was least recent
  REQUIRE(mc.get(key(1)) != nullptr);
  REQUIRE(live == 2);
  REQUIRE(mc.evictions() == 1);
  {
    auto held = mc.get(key(1));
    mc.clear();
    REQUIRE(live == 1);  // still used by `held`
  }
  REQUIRE(live == 0);
}

TEST_CASE("memory cache is bounded in bytes", "[memory_cache]") {
  int live = 0;
  kiln::cache::MemoryCache mc(100, 1000);
  for (int i = 0; i < 10; ++i) {
    auto k = std::make_shared<CountedKernel>(&live);
    k->code_bytes = 400;
    mc.put(KeyBuilder().add("i", int64_t{i}).finish(), k);
  }
  REQUIRE(mc.bytes() <= 1000);
  REQUIRE(mc.size() == 2);
}

TEST_CASE("signatures separate dtype, shape and stride class, not alignment", "[signature]") {
  alignas(64) float buf[64] = {};
  auto sig = [&](kiln::Array a) { return kiln::exact_signature(std::vector<kiln::Array>{a}); };
  auto base = sig(kiln::Array::view(buf, {4, 8}, kiln::f32));
  REQUIRE(base == sig(kiln::Array::view(buf, {4, 8}, kiln::f32)));
  REQUIRE_FALSE(base == sig(kiln::Array::view(buf, {8, 4}, kiln::f32)));
  REQUIRE_FALSE(base == sig(kiln::Array::view(buf, {4, 8}, kiln::i32)));
  REQUIRE_FALSE(base == sig(kiln::Array::view(buf, {4, 8}, kiln::f32, {1, 4})));
  // No backend specializes on the data pointer's alignment: it is not a variant of its own.
  REQUIRE(base == sig(kiln::Array::view(buf + 1, {4, 8}, kiln::f32)));
  REQUIRE(sig(kiln::Array::view(buf, {4, 8}, kiln::f32, {1, 4})).str().find("strided") !=
          std::string::npos);
}

TEST_CASE("device detection reports consistent features", "[device]") {
  const kiln::CpuInfo& c = kiln::cpu_info();
  REQUIRE(c.cores >= 1);
  REQUIRE(c.l1d_bytes > 0);
  REQUIRE(c.l2_bytes > c.l1d_bytes);
  // Usable features are a subset of what the hardware has.
  REQUIRE((c.usable_features & ~c.features) == 0);
  if (c.has(kiln::CpuFeature::avx512f)) REQUIRE(c.has(kiln::CpuFeature::avx2));
  REQUIRE_FALSE(c.isa().empty());
}
