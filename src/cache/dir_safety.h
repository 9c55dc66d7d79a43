// Ownership and permission checks for the disk cache directory. Whoever can write the cache can run
// code in every process that reads it, so a directory another user owns or can write is refused.
#pragma once

#include <sys/stat.h>

#include <string>

namespace kiln::cache {

// An open directory descriptor for the cache root, or the reason it was refused.
struct SafeDir {
  int fd = -1;
  std::string path;    // the resolved (symlink-free) absolute path
  std::string reason;  // empty when fd >= 0
};

// Resolves `dir` to an absolute, symlink-free path (creating missing components with mode 0700 when
// `create`), checks every component and opens the directory. Ancestors must be owned by root or by
// the effective user, and not group- or world-writable unless sticky (like /tmp); the directory
// itself must be owned by the effective user and writable by nobody else, sticky or not. A symlink
// among the components of `dir` is followed: it is the resolved path that is checked and opened.
SafeDir open_safe_cache_dir(const std::string& dir, bool create);

// For a directory or file inside the cache (already opened with O_NOFOLLOW and fstat'ed): owned by
// the effective user and not group- or world-writable. On false, `why` says what is wrong.
bool is_private(const struct stat& st, std::string& why);

}  // namespace kiln::cache
