#include "support/build_id.h"

#include <elf.h>
#include <link.h>
#include <xxhash.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

namespace kiln {

namespace {

struct Search {
  uintptr_t address = 0;  // an address inside the module we look for
  std::string id;
};

std::string to_hex(const uint8_t* bytes, size_t n) {
  std::string s(2 * n, '0');
  for (size_t i = 0; i < n; ++i) std::snprintf(&s[2 * i], 3, "%02x", bytes[i]);
  return s;
}

// The NT_GNU_BUILD_ID note among the module's PT_NOTE segments, or "".
std::string gnu_build_id(const dl_phdr_info* info) {
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const auto* p = reinterpret_cast<const uint8_t*>(info->dlpi_addr + ph.p_vaddr);
    const uint8_t* end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      ElfW(Nhdr) nh;
      std::memcpy(&nh, p, sizeof nh);
      const uint8_t* name = p + sizeof nh;
      const uint8_t* desc = name + ((nh.n_namesz + 3) & ~3u);
      const uint8_t* next = desc + ((nh.n_descsz + 3) & ~3u);
      if (next > end) break;
      if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0)
        return to_hex(desc, nh.n_descsz);
      p = next;
    }
  }
  return "";
}

// Without a build-id note: the module's executable segments, hashed.
std::string code_hash(const dl_phdr_info* info) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_128bits_reset(st);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X))
      XXH3_128bits_update(st, reinterpret_cast<const void*>(info->dlpi_addr + ph.p_vaddr),
                          ph.p_filesz);
  }
  const XXH128_hash_t h = XXH3_128bits_digest(st);
  XXH3_freeState(st);
  uint8_t bytes[16];
  std::memcpy(bytes, &h.high64, 8);
  std::memcpy(bytes + 8, &h.low64, 8);
  return "code:" + to_hex(bytes, 16);
}

int visit(dl_phdr_info* info, size_t, void* data) {
  auto* s = static_cast<Search*>(data);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    const uintptr_t begin = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_LOAD && s->address >= begin && s->address < begin + ph.p_memsz) {
      s->id = gnu_build_id(info);
      if (s->id.empty()) s->id = code_hash(info);
      return 1;
    }
  }
  return 0;
}

}  // namespace

const std::string& build_id() {
  static const std::string id = [] {
    Search s;
    s.address = reinterpret_cast<uintptr_t>(&build_id);
    dl_iterate_phdr(visit, &s);
    return s.id.empty() ? std::string("unknown") : s.id;
  }();
  return id;
}

}  // namespace kiln
