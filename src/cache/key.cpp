#include "cache/key.h"

#include <xxhash.h>

#include <cstring>

namespace kiln::cache {

namespace {

void put_u64(std::string& buf, uint64_t v) {
  char b[8];
  std::memcpy(b, &v, 8);
  buf.append(b, 8);
}

}  // namespace

std::array<uint8_t, 16> digest_fields(
    const std::vector<std::pair<std::string, std::string>>& fields) {
  std::string buf;
  for (const auto& [name, value] : fields) {
    put_u64(buf, name.size());
    buf += name;
    put_u64(buf, value.size());
    buf += value;
  }
  XXH128_hash_t h = XXH3_128bits(buf.data(), buf.size());
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, h);
  std::array<uint8_t, 16> out{};
  std::memcpy(out.data(), c.digest, 16);
  return out;
}

KeyBuilder& KeyBuilder::add(std::string_view name, std::string_view value) {
  fields_.emplace_back(std::string(name), std::string(value));
  return *this;
}

KeyBuilder& KeyBuilder::add(std::string_view name, int64_t value) {
  return add(name, std::to_string(value));
}

CacheKey KeyBuilder::finish() const {
  CacheKey k;
  k.fields = fields_;
  k.digest = digest_fields(fields_);
  return k;
}

std::string CacheKey::hex() const {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (uint8_t b : digest) {
    s += digits[b >> 4];
    s += digits[b & 15];
  }
  return s;
}

std::string CacheKey::manifest() const {
  std::string s;
  for (const auto& [name, value] : fields) {
    s += name;
    s += ": ";
    for (char c : value) s += (c == '\n') ? ' ' : c;  // one line per field
    s += '\n';
  }
  return s;
}

bool parse_manifest(std::string_view text, std::vector<std::pair<std::string, std::string>>& out) {
  out.clear();
  while (!text.empty()) {
    size_t nl = text.find('\n');
    if (nl == std::string_view::npos) return false;
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl + 1);
    size_t colon = line.find(": ");
    if (colon == std::string_view::npos || colon == 0) return false;
    out.emplace_back(std::string(line.substr(0, colon)), std::string(line.substr(colon + 2)));
  }
  return true;
}

}  // namespace kiln::cache
