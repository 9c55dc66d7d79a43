// Helpers shared by the disk-cache tests: private temp directories, keys and payloads derived from
// an index, and raw file access for corrupting entries.
#pragma once

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "cache/disk_cache.h"
#include "cache/key.h"

namespace kiln::cache::testing {

// A fresh directory under /tmp (tests only: the product never defaults to /tmp), removed after.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/kiln-cache-test-XXXXXX";
    char* p = mkdtemp(tmpl);
    if (p) path_ = p;
  }
  ~TempDir() {
    if (path_.empty()) return;
    nftw(
        path_.c_str(),
        [](const char* p, const struct stat*, int type, struct FTW*) {
          if (type == FTW_DP) return rmdir(p);
          return unlink(p);
        },
        16, FTW_DEPTH | FTW_PHYS);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline DiskCacheConfig make_config(const std::string& dir, int64_t max_bytes = int64_t{1} << 30) {
  DiskCacheConfig c;
  c.dir = dir;
  c.mode = CacheMode::on;
  c.max_bytes = max_bytes;
  return c;
}

inline CacheKey make_key(int i, const std::string& variant = "base") {
  char kernel[16];
  std::snprintf(kernel, sizeof kernel, "%05d", i);
  return KeyBuilder()
      .add("kiln_version", "0.1.0")
      .add("graph", std::string("fused_kernel_") + kernel)
      .add("signature", "f32[128,64];f32[64]")
      .add("device", "x86_64 avx512f avx512bw l2=2097152")
      .add("variant", variant)
      .finish();
}

// Deterministic bytes that depend on the key index, so a wrong payload is always detectable.
inline std::vector<uint8_t> payload_for(int i, size_t size) {
  std::vector<uint8_t> out(size);
  uint64_t x = 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(i + 1);
  for (size_t j = 0; j < size; ++j) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    out[j] = static_cast<uint8_t>(x);
  }
  return out;
}

inline bool file_exists(const std::string& path) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0;
}

inline std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return;
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  close(fd);
}

}  // namespace kiln::cache::testing
