#include "cache/dir_safety.h"

#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace kiln::cache {

namespace {

std::string errno_text(int err) { return std::strerror(err); }

// "/a/b/c" -> {"/", "/a", "/a/b", "/a/b/c"}.
std::vector<std::string> prefixes(const std::string& abs) {
  std::vector<std::string> out{"/"};
  size_t pos = 1;
  while (pos < abs.size()) {
    size_t slash = abs.find('/', pos);
    if (slash == std::string::npos) slash = abs.size();
    if (slash > pos) out.push_back(abs.substr(0, slash));
    pos = slash + 1;
  }
  return out;
}

std::string make_absolute(const std::string& dir) {
  if (!dir.empty() && dir[0] == '/') return dir;
  char cwd[PATH_MAX];
  if (!getcwd(cwd, sizeof cwd)) return std::string();
  return std::string(cwd) + "/" + dir;
}

bool check_ancestor(const std::string& path, const struct stat& st, std::string& why) {
  if (!S_ISDIR(st.st_mode)) {
    why = path + " is not a directory";
    return false;
  }
  if (st.st_uid != geteuid() && st.st_uid != 0) {
    why = path + " is owned by uid " + std::to_string(st.st_uid);
    return false;
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
    why = path + " is group- or world-writable without the sticky bit";
    return false;
  }
  return true;
}

}  // namespace

bool is_private(const struct stat& st, std::string& why) {
  if (st.st_uid != geteuid()) {
    why = "owned by uid " + std::to_string(st.st_uid);
    return false;
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    why = "group- or world-writable";
    return false;
  }
  return true;
}

SafeDir open_safe_cache_dir(const std::string& dir, bool create) {
  SafeDir out;
  if (dir.empty()) {
    out.reason = "no cache directory configured (KILN_CACHE_DIR, XDG_CACHE_HOME and HOME unset)";
    return out;
  }
  std::string abs = make_absolute(dir);
  if (abs.empty()) {
    out.reason = "cannot make " + dir + " absolute";
    return out;
  }
  if (create) {
    for (const std::string& p : prefixes(abs)) {
      if (mkdir(p.c_str(), 0700) != 0 && errno != EEXIST) {
        out.reason = "cannot create " + p + ": " + errno_text(errno);
        return out;
      }
    }
  }
  char real[PATH_MAX];
  if (!realpath(abs.c_str(), real)) {
    out.reason = "cannot resolve " + abs + ": " + errno_text(errno);
    return out;
  }
  out.path = real;

  std::vector<std::string> parts = prefixes(out.path);
  struct stat last {};
  for (size_t i = 0; i < parts.size(); ++i) {
    struct stat st {};
    if (lstat(parts[i].c_str(), &st) != 0) {
      out.reason = "cannot stat " + parts[i] + ": " + errno_text(errno);
      return out;
    }
    std::string why;
    if (!check_ancestor(parts[i], st, why)) {
      out.reason = why;
      return out;
    }
    last = st;
  }
  // The directory itself: ours alone, whether or not it is sticky.
  if (std::string why; !is_private(last, why)) {
    out.reason = out.path + " is " + why;
    return out;
  }
  int fd = open(out.path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    out.reason = "cannot open " + out.path + ": " + errno_text(errno);
    return out;
  }
  // The descriptor must be the directory that was checked, not one swapped in since.
  struct stat st {};
  std::string why;
  if (fstat(fd, &st) != 0 || st.st_dev != last.st_dev || st.st_ino != last.st_ino ||
      !is_private(st, why)) {
    close(fd);
    out.reason = out.path + " changed while it was being checked";
    return out;
  }
  out.fd = fd;
  return out;
}

}  // namespace kiln::cache
