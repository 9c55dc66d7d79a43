// Cache keys: a 128-bit xxh3 digest over length-prefixed (name, value) fields, plus the readable
// manifest of those fields ("name: value" lines) kept with every entry so that a key can be
// explained and a hash collision can be detected on load.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::cache {

struct CacheKey {
  std::array<uint8_t, 16> digest{};
  std::vector<std::pair<std::string, std::string>> fields;  // the manifest, in order

  std::string hex() const;       // 32 lowercase hex digits
  std::string manifest() const;  // "name: value\n" per field
  bool operator==(const CacheKey& o) const { return digest == o.digest; }
};

class KeyBuilder {
 public:
  KeyBuilder& add(std::string_view name, std::string_view value);
  KeyBuilder& add(std::string_view name, int64_t value);
  CacheKey finish() const;

 private:
  std::vector<std::pair<std::string, std::string>> fields_;
};

// Parses a manifest produced by CacheKey::manifest(); returns false on malformed text.
bool parse_manifest(std::string_view text, std::vector<std::pair<std::string, std::string>>& out);
// Recomputes the digest of a manifest's fields (what KeyBuilder would produce).
std::array<uint8_t, 16> digest_fields(
    const std::vector<std::pair<std::string, std::string>>& fields);

struct KeyHash {
  size_t operator()(const CacheKey& k) const {
    size_t h;
    static_assert(sizeof(h) <= 16);
    __builtin_memcpy(&h, k.digest.data(), sizeof(h));
    return h;
  }
};

}  // namespace kiln::cache
