// Entry serialization: round trip, and every way the parser refuses bytes.
#include <xxhash.h>

#include <catch2/catch.hpp>
#include <cstring>

#include "cache/entry_format.h"
#include "cache_test_util.h"

using namespace kiln::cache;
using kiln::cache::testing::payload_for;

namespace {

std::vector<uint8_t> reseal(std::vector<uint8_t> bytes) {
  size_t body = bytes.size() - kEntryChecksumBytes;
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, XXH3_128bits(bytes.data(), body));
  std::memcpy(bytes.data() + body, c.digest, kEntryChecksumBytes);
  return bytes;
}

ParseStatus parse(const std::vector<uint8_t>& bytes) {
  EntryView v;
  return parse_entry(bytes, v);
}

}  // namespace

TEST_CASE("entry format round trips every payload kind", "[cache][format]") {
  for (PayloadKind kind : {PayloadKind::llvm_object, PayloadKind::x86_blob, PayloadKind::cubin,
                           PayloadKind::shape_decisions}) {
    for (size_t size : {size_t{0}, size_t{1}, size_t{4097}}) {
      std::vector<uint8_t> payload = payload_for(static_cast<int>(size), size);
      std::string manifest = "graph: abc\nsignature: f32[4]\n";
      std::vector<uint8_t> bytes = encode_entry(kind, manifest, payload);
      REQUIRE(bytes.size() == kEntryOverheadBytes + manifest.size() + size);
      EntryView v;
      REQUIRE(parse_entry(bytes, v) == ParseStatus::ok);
      CHECK(v.kind == kind);
      CHECK(v.manifest == manifest);
      CHECK(std::vector<uint8_t>(v.payload.begin(), v.payload.end()) == payload);
    }
  }
}

TEST_CASE("entry parser refuses malformed headers", "[cache][format]") {
  std::vector<uint8_t> good = encode_entry(PayloadKind::x86_blob, "a: b\n", payload_for(1, 100));
  REQUIRE(parse(good) == ParseStatus::ok);

  SECTION("too short") {
    CHECK(parse({}) == ParseStatus::too_short);
    CHECK(parse(std::vector<uint8_t>(good.begin(), good.begin() + 47)) == ParseStatus::too_short);
  }
  SECTION("bad magic") {
    auto b = good;
    b[0] ^= 1;
    CHECK(parse(reseal(b)) == ParseStatus::bad_magic);
  }
  SECTION("wrong version, even with a valid checksum") {
    auto b = good;
    b[8] = static_cast<uint8_t>(kEntryFormatVersion + 1);
    CHECK(parse(reseal(b)) == ParseStatus::wrong_version);
  }
  SECTION("unknown kind") {
    for (uint8_t k : {uint8_t{0}, uint8_t{5}, uint8_t{255}}) {
      auto b = good;
      b[12] = k;
      CHECK(parse(reseal(b)) == ParseStatus::bad_kind);
    }
  }
  SECTION("reserved bytes") {
    auto b = good;
    b[14] = 1;
    CHECK(parse(reseal(b)) == ParseStatus::bad_reserved);
  }
  SECTION("size fields that lie, including ones that would overflow a sum") {
    for (uint64_t m :
         {uint64_t{6}, uint64_t{4}, ~uint64_t{0}, kMaxManifestBytes + 1, uint64_t{1} << 63}) {
      auto b = good;
      for (int i = 0; i < 8; ++i) b[16 + i] = static_cast<uint8_t>(m >> (8 * i));
      CHECK(parse(reseal(b)) == ParseStatus::bad_size);
    }
    for (uint64_t p : {uint64_t{101}, uint64_t{99}, ~uint64_t{0} - 20, kMaxPayloadBytes + 1}) {
      auto b = good;
      for (int i = 0; i < 8; ++i) b[24 + i] = static_cast<uint8_t>(p >> (8 * i));
      CHECK(parse(reseal(b)) == ParseStatus::bad_size);
    }
  }
  SECTION("trailing bytes") {
    auto b = good;
    b.push_back(0);
    CHECK(parse(b) == ParseStatus::bad_size);
  }
  SECTION("checksum") {
    for (size_t at : {size_t{32}, size_t{40}, good.size() - 17, good.size() - 1}) {
      auto b = good;
      b[at] ^= 0x80;
      CHECK(parse(b) == ParseStatus::bad_checksum);
    }
  }
}

TEST_CASE("entry header parses without the rest of the file", "[cache][format]") {
  std::vector<uint8_t> good = encode_entry(PayloadKind::cubin, "a: b\n", payload_for(2, 10));
  EntryHeader h;
  REQUIRE(parse_entry_header(std::span<const uint8_t>(good.data(), kEntryHeaderBytes), h) ==
          ParseStatus::ok);
  CHECK(h.kind == static_cast<uint8_t>(PayloadKind::cubin));
  CHECK(h.manifest_size == 5);
  CHECK(h.payload_size == 10);
  CHECK(std::string(payload_kind_name(PayloadKind::cubin)) == "cubin");
}
