// libFuzzer target for the disk-cache entry parser (scripts/fuzz-entry-parser builds and runs it).
// Any input must parse or be refused without a crash, an out-of-bounds read or a huge allocation;
// an input that parses must re-encode to exactly the same bytes, and its manifest text must go
// through the manifest parser safely.
//
// Built with -DKILN_FUZZ_SEED_MAIN instead of -fsanitize=fuzzer, this file is a small program that
// writes valid entries into a directory, to seed the corpus.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cache/entry_format.h"
#include "cache/key.h"

namespace {

std::vector<uint8_t> seed_entry(kiln::cache::PayloadKind kind, size_t payload_size) {
  kiln::cache::CacheKey key = kiln::cache::KeyBuilder()
                                  .add("kiln_version", "0.1.0")
                                  .add("graph", "fused_add_relu")
                                  .add("signature", "f32[?,64]")
                                  .finish();
  std::vector<uint8_t> payload(payload_size);
  for (size_t i = 0; i < payload_size; ++i) payload[i] = static_cast<uint8_t>(i * 31 + 7);
  return kiln::cache::encode_entry(kind, key.manifest(), payload);
}

}  // namespace

#ifdef KILN_FUZZ_SEED_MAIN
int main(int argc, char** argv) {
  if (argc != 2) return 2;
  using kiln::cache::PayloadKind;
  int n = 0;
  for (PayloadKind kind : {PayloadKind::llvm_object, PayloadKind::x86_blob, PayloadKind::cubin}) {
    for (size_t size : {size_t{0}, size_t{16}, size_t{300}}) {
      std::vector<uint8_t> bytes = seed_entry(kind, size);
      std::string path = std::string(argv[1]) + "/seed" + std::to_string(n++) + ".kc";
      FILE* f = std::fopen(path.c_str(), "wb");
      if (!f) return 1;
      std::fwrite(bytes.data(), 1, bytes.size(), f);
      std::fclose(f);
    }
  }
  return 0;
}
#else
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln::cache;
  std::span<const uint8_t> bytes(data, size);
  EntryHeader header;
  (void)parse_entry_header(bytes, header);
  EntryView view;
  if (parse_entry(bytes, view) != ParseStatus::ok) return 0;
  std::vector<uint8_t> again = encode_entry(view.kind, view.manifest, view.payload);
  if (again.size() != size || !std::equal(again.begin(), again.end(), data)) std::abort();
  std::vector<std::pair<std::string, std::string> > fields;
  if (parse_manifest(view.manifest, fields)) (void)digest_fields(fields);
  return 0;
}
#endif
