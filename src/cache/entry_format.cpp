#include "cache/entry_format.h"

#include <xxhash.h>

#include <cstring>

#include "support/check.h"

namespace kiln::cache {

namespace {

void put_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

void put_u64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

uint32_t get_u32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}

uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

void checksum(const uint8_t* data, size_t size, uint8_t out[kEntryChecksumBytes]) {
  XXH128_hash_t h = XXH3_128bits(data, size);
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, h);
  static_assert(sizeof(c.digest) == kEntryChecksumBytes);
  std::memcpy(out, c.digest, kEntryChecksumBytes);
}

}  // namespace

bool is_valid_payload_kind(uint8_t kind) { return kind >= 1 && kind <= 4; }

const char* payload_kind_name(PayloadKind kind) {
  switch (kind) {
    case PayloadKind::llvm_object:
      return "llvm_object";
    case PayloadKind::x86_blob:
      return "x86_blob";
    case PayloadKind::cubin:
      return "cubin";
    case PayloadKind::shape_decisions:
      return "shape_decisions";
  }
  return "unknown";
}

const char* parse_status_name(ParseStatus status) {
  switch (status) {
    case ParseStatus::ok:
      return "ok";
    case ParseStatus::too_short:
      return "too short";
    case ParseStatus::bad_magic:
      return "bad magic";
    case ParseStatus::wrong_version:
      return "wrong format version";
    case ParseStatus::bad_kind:
      return "unknown payload kind";
    case ParseStatus::bad_reserved:
      return "reserved header bytes set";
    case ParseStatus::bad_size:
      return "size fields disagree with the file";
    case ParseStatus::bad_checksum:
      return "checksum mismatch";
  }
  return "unknown";
}

std::vector<uint8_t> encode_entry(PayloadKind kind, std::string_view manifest,
                                  std::span<const uint8_t> payload) {
  KILN_CHECK(manifest.size() <= kMaxManifestBytes) << "manifest of " << manifest.size() << " bytes";
  KILN_CHECK(payload.size() <= kMaxPayloadBytes) << "payload of " << payload.size() << " bytes";
  KILN_CHECK(is_valid_payload_kind(static_cast<uint8_t>(kind)));
  std::vector<uint8_t> out(kEntryOverheadBytes + manifest.size() + payload.size());
  uint8_t* p = out.data();
  std::memcpy(p, kEntryMagic.data(), kEntryMagic.size());
  put_u32(p + 8, kEntryFormatVersion);
  p[12] = static_cast<uint8_t>(kind);
  p[13] = p[14] = p[15] = 0;
  put_u64(p + 16, manifest.size());
  put_u64(p + 24, payload.size());
  if (!manifest.empty()) std::memcpy(p + kEntryHeaderBytes, manifest.data(), manifest.size());
  if (!payload.empty()) {
    std::memcpy(p + kEntryHeaderBytes + manifest.size(), payload.data(), payload.size());
  }
  size_t body = out.size() - kEntryChecksumBytes;
  checksum(p, body, p + body);
  return out;
}

ParseStatus parse_entry_header(std::span<const uint8_t> bytes, EntryHeader& out) {
  if (bytes.size() < kEntryHeaderBytes) return ParseStatus::too_short;
  const uint8_t* p = bytes.data();
  if (std::memcmp(p, kEntryMagic.data(), kEntryMagic.size()) != 0) return ParseStatus::bad_magic;
  out.version = get_u32(p + 8);
  out.kind = p[12];
  out.manifest_size = get_u64(p + 16);
  out.payload_size = get_u64(p + 24);
  if (out.version != kEntryFormatVersion) return ParseStatus::wrong_version;
  if (!is_valid_payload_kind(out.kind)) return ParseStatus::bad_kind;
  if (p[13] != 0 || p[14] != 0 || p[15] != 0) return ParseStatus::bad_reserved;
  return ParseStatus::ok;
}

ParseStatus parse_entry(std::span<const uint8_t> bytes, EntryView& out) {
  if (bytes.size() < kEntryOverheadBytes) return ParseStatus::too_short;
  EntryHeader h;
  if (ParseStatus s = parse_entry_header(bytes, h); s != ParseStatus::ok) return s;
  // Each size is checked against its own limit first, so the sum below cannot overflow, and then
  // the total must account for the buffer exactly: no trailing bytes, no short payload.
  if (h.manifest_size > kMaxManifestBytes || h.payload_size > kMaxPayloadBytes) {
    return ParseStatus::bad_size;
  }
  uint64_t expected = kEntryOverheadBytes + h.manifest_size + h.payload_size;
  if (expected != bytes.size()) return ParseStatus::bad_size;

  size_t body = bytes.size() - kEntryChecksumBytes;
  uint8_t sum[kEntryChecksumBytes];
  checksum(bytes.data(), body, sum);
  if (std::memcmp(sum, bytes.data() + body, kEntryChecksumBytes) != 0) {
    return ParseStatus::bad_checksum;
  }
  const uint8_t* m = bytes.data() + kEntryHeaderBytes;
  out.kind = static_cast<PayloadKind>(h.kind);
  out.manifest = std::string_view(reinterpret_cast<const char*>(m), h.manifest_size);
  out.payload = bytes.subspan(kEntryHeaderBytes + h.manifest_size, h.payload_size);
  return ParseStatus::ok;
}

}  // namespace kiln::cache
