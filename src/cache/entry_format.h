// The bytes of one disk-cache entry: a fixed little-endian header, the key's readable manifest, the
// payload, and an xxh3-128 checksum over all of it. The parser bounds-checks every size against the
// buffer it was given and builds nothing from the bytes beyond views into that buffer.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace kiln::cache {

// What the payload is, and so who may consume it. Values are stored on disk: never renumber.
// shape_decisions: which dims of a function's arguments a process settled on making symbolic.
enum class PayloadKind : uint8_t { llvm_object = 1, x86_blob = 2, cubin = 3, shape_decisions = 4 };

// Bumping the version invalidates every entry: it is checked in the header, and it names the
// directory entries live in (<dir>/v<version>/...), so old entries are never even opened.
inline constexpr uint32_t kEntryFormatVersion = 1;
inline constexpr std::array<uint8_t, 8> kEntryMagic = {'K', 'I', 'L', 'N', 'E', 'N', 'T', 0x1a};

// Layout (all integers little-endian):
//   0  magic[8]
//   8  u32 format version
//  12  u8  payload kind
//  13  u8[3] reserved, zero
//  16  u64 manifest size
//  24  u64 payload size
//  32  manifest bytes, then payload bytes
//  end-16: xxh3-128 (canonical, big-endian) of every byte before it
inline constexpr size_t kEntryHeaderBytes = 32;
inline constexpr size_t kEntryChecksumBytes = 16;
inline constexpr size_t kEntryOverheadBytes = kEntryHeaderBytes + kEntryChecksumBytes;
// Limits the parser enforces before it looks further; a writer refuses anything larger.
inline constexpr uint64_t kMaxManifestBytes = uint64_t{1} << 20;
inline constexpr uint64_t kMaxPayloadBytes = uint64_t{1} << 31;
inline constexpr uint64_t kMaxEntryBytes =
    kMaxPayloadBytes + kMaxManifestBytes + kEntryOverheadBytes;

enum class ParseStatus : uint8_t {
  ok,
  too_short,      // smaller than a header plus a checksum
  bad_magic,      // not a kiln entry
  wrong_version,  // written by another entry format version
  bad_kind,       // unknown payload kind
  bad_reserved,   // reserved header bytes not zero
  bad_size,       // a size field disagrees with the buffer or exceeds its limit
  bad_checksum,   // the bytes changed after they were written
};

// Views into the parsed buffer; valid only while that buffer lives.
struct EntryView {
  PayloadKind kind = PayloadKind::llvm_object;
  std::string_view manifest;
  std::span<const uint8_t> payload;
};

// The header fields alone, for listing entries without reading their payload.
struct EntryHeader {
  uint32_t version = 0;
  uint8_t kind = 0;
  uint64_t manifest_size = 0;
  uint64_t payload_size = 0;
};

bool is_valid_payload_kind(uint8_t kind);
const char* payload_kind_name(PayloadKind kind);
const char* parse_status_name(ParseStatus status);

// Serializes one entry. Requires manifest and payload within the limits above (checked).
std::vector<uint8_t> encode_entry(PayloadKind kind, std::string_view manifest,
                                  std::span<const uint8_t> payload);

// Parses and verifies a whole entry. On ok, `out` views into `bytes`.
ParseStatus parse_entry(std::span<const uint8_t> bytes, EntryView& out);

// Decodes only the first kEntryHeaderBytes (magic, version, kind, reserved bytes); sizes are
// returned as stored and are not checked against any file length.
ParseStatus parse_entry_header(std::span<const uint8_t> bytes, EntryHeader& out);

}  // namespace kiln::cache
