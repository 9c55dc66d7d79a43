#include "cache/disk_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "cache/dir_safety.h"
#include "support/log.h"

// Why eviction (or `clear`, or a concurrent publish that replaces an entry) cannot break a process
// that is loading the same entry: a reader opens the entry once and then reads the whole file
// through that descriptor. Eviction only unlinks the *name*; on Linux (POSIX) an unlinked inode
// lives until its last descriptor is closed, so the reader keeps reading the complete, immutable
// bytes it opened. Publishing never writes into an existing entry: it renames a new inode over the
// name, which again leaves open descriptors on the old inode intact. A reader that looks the name
// up after the unlink simply misses. Entries are never modified in place, except for their
// timestamps (the LRU clock), which are not part of the content.

namespace kiln::cache {

namespace {

constexpr size_t kWriteChunk = size_t{64} << 10;
constexpr const char* kEntrySuffix = ".kc";
constexpr const char* kTempPrefix = ".tmp.";

std::string version_dir_name() { return "v" + std::to_string(kEntryFormatVersion); }

bool is_hex(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// "<32 hex>.kc" -> true.
bool is_entry_name(std::string_view name) {
  return name.size() == 35 && name.substr(32) == kEntrySuffix && is_hex(name.substr(0, 32));
}

bool is_temp_name(std::string_view name) { return name.starts_with(kTempPrefix); }

int64_t mtime_ns(const struct stat& st) {
  return int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
}

int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

std::string random_suffix() {
  uint64_t r = 0;
  if (getrandom(&r, sizeof r, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof r)) {
    r = static_cast<uint64_t>(now_ns()) * 0x9e3779b97f4a7c15ull ^ static_cast<uint64_t>(getpid());
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(r));
  return buf;
}

// Opens `name` in `dir_fd` as a directory, never following a symlink.
int open_dir_at(int dir_fd, const char* name) {
  return openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

// Calls fn(name) for each name in the directory open at `dir_fd` (the descriptor is not consumed).
template <typename Fn>
void for_each_name(int dir_fd, Fn&& fn) {
  int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);  // own offset, own lifetime
  if (fd < 0) return;
  DIR* d = fdopendir(fd);
  if (!d) {
    close(fd);
    return;
  }
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) {
    std::string_view n = e->d_name;
    if (n != "." && n != "..") names.emplace_back(n);
  }
  closedir(d);
  for (const std::string& n : names) fn(n);
}

// Reads a whole entry file through `fd` (already fstat'ed as `st`).
bool read_all(int fd, const struct stat& st, std::vector<uint8_t>& buf) {
  if (st.st_size < 0 || static_cast<uint64_t>(st.st_size) > kMaxEntryBytes) return false;
  buf.resize(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < buf.size()) {
    ssize_t n = pread(fd, buf.data() + done, buf.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

}  // namespace

struct DiskCache::Scan {
  std::vector<EntryInfo> entries;
  int64_t bytes = 0;
  int64_t temp_files = 0;
};

DiskCache::DiskCache(DiskCacheConfig cfg) : cfg_(std::move(cfg)) {
  if (cfg_.mode == CacheMode::off) {
    reason_ = "KILN_CACHE=off";
    return;
  }
  bool create = cfg_.mode == CacheMode::on;
  if (cfg_.mode == CacheMode::readonly && !cfg_.dir.empty() &&
      access(cfg_.dir.c_str(), F_OK) != 0) {
    reason_ = cfg_.dir + " does not exist (opened read-only, so not created)";
    KILN_LOG_AT(info) << "disk cache: " << reason_;
    return;
  }
  SafeDir d = open_safe_cache_dir(cfg_.dir, create);
  if (d.fd < 0) {
    disable(d.reason);
    return;
  }
  root_fd_ = d.fd;
  resolved_dir_ = d.path;
  std::string vname = version_dir_name();
  if (create && mkdirat(root_fd_, vname.c_str(), 0700) != 0 && errno != EEXIST) {
    disable("cannot create " + resolved_dir_ + "/" + vname + ": " + std::strerror(errno));
    return;
  }
  version_fd_ = open_dir_at(root_fd_, vname.c_str());
  if (version_fd_ < 0) {
    int err = errno;
    if (err == ENOENT) {  // readonly, nothing published yet
      reason_ = resolved_dir_ + "/" + vname + " does not exist";
      KILN_LOG_AT(info) << "disk cache: " << reason_;
      return;
    }
    struct stat st {};
    bool link =
        fstatat(root_fd_, vname.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
    disable(resolved_dir_ + "/" + vname +
            (link ? std::string(" is a symlink") : ": " + std::string(std::strerror(err))));
    return;
  }
  enabled_.store(true, std::memory_order_release);
  if (!check_opened(version_fd_, "directory", vname, true)) return;
  KILN_LOG_AT(debug) << "disk cache at " << resolved_dir_ << (writable() ? "" : " (read-only)");
}

DiskCache::~DiskCache() {
  if (version_fd_ >= 0) close(version_fd_);
  if (root_fd_ >= 0) close(root_fd_);
}

std::string DiskCache::disabled_reason() const {
  std::lock_guard<std::mutex> lock(mu_);
  return enabled() ? std::string() : reason_;
}

void DiskCache::warn_once(std::atomic<bool>& flag, const std::string& message) {
  if (flag.exchange(true)) return;
  warnings_.fetch_add(1);
  KILN_LOG_AT(warn) << message;
}

void DiskCache::disable(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (reason_.empty() || enabled()) reason_ = reason;
    enabled_.store(false, std::memory_order_release);
  }
  std::string where = cfg_.dir.empty() ? std::string("disk cache") : "disk cache " + cfg_.dir;
  warn_once(warned_unsafe_, where + " not used: " + reason + "; running without a disk cache");
}

bool DiskCache::check_opened(int fd, const char* what, const std::string& name, bool want_dir,
                             struct stat* out) {
  struct stat st {};
  std::string why;
  if (fstat(fd, &st) != 0) {
    why = std::strerror(errno);
  } else if (want_dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) {
    why = want_dir ? "not a directory" : "not a regular file";
  } else if (is_private(st, why)) {
    if (out) *out = st;
    return true;
  }
  disable(std::string(what) + " " + name + " in the cache is " + why);
  return false;
}

std::string DiskCache::entry_path(const CacheKey& key) const {
  std::string hex = key.hex();
  return resolved_dir_ + "/" + version_dir_name() + "/" + hex.substr(0, 2) + "/" + hex +
         kEntrySuffix;
}

// Returns an open shard directory, or -errno (-ENOENT: not there; the cache may now be disabled).
int DiskCache::open_shard(std::string_view shard, bool create) {
  std::string name(shard);
  if (create && mkdirat(version_fd_, name.c_str(), 0700) != 0 && errno != EEXIST) return -errno;
  int fd = open_dir_at(version_fd_, name.c_str());
  if (fd < 0) {
    int err = errno;
    if (err == ELOOP || err == ENOTDIR) {
      disable("directory " + name + " in the cache is a symlink or not a directory");
    }
    return -err;
  }
  if (!check_opened(fd, "directory", name, true)) {
    close(fd);
    return -EPERM;
  }
  return fd;
}

void DiskCache::remove_bad_entry(int shard_fd, const std::string& name, const struct stat& seen,
                                 const char* why) {
  bad_removed_.fetch_add(1);
  KILN_LOG_AT(info) << "disk cache: bad entry " << name << " (" << why << "), "
                    << (writable() ? "removed" : "ignored (read-only cache)");
  if (!writable()) return;
  // Remove it only if the name still holds what we read: a writer may have replaced it meanwhile.
  struct stat now {};
  if (fstatat(shard_fd, name.c_str(), &now, AT_SYMLINK_NOFOLLOW) == 0 &&
      now.st_dev == seen.st_dev && now.st_ino == seen.st_ino) {
    unlinkat(shard_fd, name.c_str(), 0);
  }
}

std::optional<std::vector<uint8_t>> DiskCache::load(const CacheKey& key, PayloadKind kind) {
  auto miss = [this]() -> std::optional<std::vector<uint8_t>> {
    misses_.fetch_add(1);
    return std::nullopt;
  };
  if (!enabled()) return miss();
  try {
    std::string hex = key.hex();
    int sfd = open_shard(std::string_view(hex).substr(0, 2), false);
    if (sfd < 0) return miss();
    Fd shard(sfd);
    std::string name = hex + kEntrySuffix;
    Fd fd(openat(shard.get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (fd.get() < 0) {
      if (errno == ELOOP) disable("entry " + name + " is a symlink");
      return miss();
    }
    struct stat st {};
    if (!check_opened(fd.get(), "entry", name, false, &st)) return miss();
    std::vector<uint8_t> buf;
    if (!read_all(fd.get(), st, buf)) {
      remove_bad_entry(shard.get(), name, st, "unreadable or oversized");
      return miss();
    }
    EntryView view;
    if (ParseStatus s = parse_entry(buf, view); s != ParseStatus::ok) {
      remove_bad_entry(shard.get(), name, st, parse_status_name(s));
      return miss();
    }
    if (view.kind != kind) {
      remove_bad_entry(shard.get(), name, st, "payload kind differs");
      return miss();
    }
    if (view.manifest != key.manifest()) {
      remove_bad_entry(shard.get(), name, st, "manifest differs from the key's");
      return miss();
    }
    if (writable()) {  // the LRU clock: a load makes the entry the most recently used
      const timespec now[2] = {{0, UTIME_NOW}, {0, UTIME_NOW}};
      futimens(fd.get(), now);
    }
    size_t offset = static_cast<size_t>(view.payload.data() - buf.data());
    size_t size = view.payload.size();
    std::memmove(buf.data(), buf.data() + offset, size);
    buf.resize(size);
    hits_.fetch_add(1);
    return buf;
  } catch (const std::exception& e) {  // bad_alloc, or a kiln bug: still only a miss
    KILN_LOG_AT(info) << "disk cache: load failed: " << e.what();
    return miss();
  }
}

bool DiskCache::store(const CacheKey& key, PayloadKind kind, std::span<const uint8_t> payload,
                      Durability durability) {
  if (!writable()) return false;
  std::string manifest = key.manifest();
  if (payload.size() > kMaxPayloadBytes || manifest.size() > kMaxManifestBytes ||
      kEntryOverheadBytes + manifest.size() + payload.size() >
          static_cast<uint64_t>(cfg_.max_bytes)) {
    KILN_LOG_AT(info) << "disk cache: entry of " << payload.size()
                      << " bytes not stored (too large)";
    store_failures_.fetch_add(1);
    return false;
  }
  std::string hex = key.hex();
  std::string name = hex + kEntrySuffix;
  std::string temp = kTempPrefix + hex + "." + std::to_string(getpid()) + "." + random_suffix();
  int shard_fd = -1;
  bool temp_created = false;
  auto fail = [&](const char* step, int err) {
    if (temp_created) unlinkat(shard_fd, temp.c_str(), 0);
    if (shard_fd >= 0) close(shard_fd);
    store_failures_.fetch_add(1);
    if (enabled()) {
      warn_once(warned_io_, "disk cache " + resolved_dir_ + ": cannot publish an entry (" + step +
                                ": " + std::strerror(err) + "); running on without storing");
    }
    return false;
  };
  try {
    std::vector<uint8_t> bytes = encode_entry(kind, manifest, payload);
    shard_fd = open_shard(std::string_view(hex).substr(0, 2), true);
    if (shard_fd < 0) {
      int err = -shard_fd;
      shard_fd = -1;
      return fail("shard directory", err);
    }
    int err = inject(StoreStep::open_temp);
    Fd fd(err ? -1
              : openat(shard_fd, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                       0600));
    if (fd.get() < 0) return fail("create temp file", err ? err : errno);
    temp_created = true;
    for (size_t done = 0; done < bytes.size();) {
      if ((err = inject(StoreStep::write)) != 0) return fail("write", err);
      size_t chunk = std::min(kWriteChunk, bytes.size() - done);
      ssize_t n = write(fd.get(), bytes.data() + done, chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return fail("write", n < 0 ? errno : ENOSPC);
      done += static_cast<size_t>(n);
    }
    // The data must be on disk before the name is: otherwise a crash could leave a published
    // name over an empty or partial file (the checksum would catch it, but as a needless miss,
    // which a `checksummed` caller accepts).
    if (durability == Durability::fsynced &&
        ((err = inject(StoreStep::fsync)) != 0 || fsync(fd.get()) != 0)) {
      return fail("fsync", err ? err : errno);
    }
    if (close(fd.release()) != 0) return fail("close", errno);  // NFS reports EDQUOT here
    if ((err = inject(StoreStep::rename)) != 0 ||
        renameat(shard_fd, temp.c_str(), shard_fd, name.c_str()) != 0) {
      return fail("rename", err ? err : errno);
    }
    temp_created = false;
    close(shard_fd);
    shard_fd = -1;
    stores_.fetch_add(1);
    account_store(static_cast<int64_t>(bytes.size()));
    return true;
  } catch (const std::exception& e) {
    KILN_LOG_AT(info) << "disk cache: store failed: " << e.what();
    return fail("store", ENOMEM);
  }
}

void DiskCache::account_store(int64_t bytes) {
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) return;  // another thread is scanning; it will see this entry
  unscanned_bytes_ += bytes;
  if (estimated_bytes_ >= 0) estimated_bytes_ += bytes;
  // Other processes publish too, and this estimate does not see their entries. So the directory is
  // rescanned on this process's first publish (which also cleans up after killed writers), when
  // the estimate crosses the cap, and after every tenth of the cap published here: the total then
  // stays under max_bytes * (1 + 0.1 * concurrent writers) plus one entry per writer.
  if (estimated_bytes_ >= 0 && estimated_bytes_ <= cfg_.max_bytes &&
      unscanned_bytes_ <= cfg_.max_bytes / 10) {
    return;
  }
  evict_locked(std::nullopt);
}

DiskCache::Scan DiskCache::scan(bool remove_stale_temps, std::chrono::seconds max_age) const {
  Scan s;
  if (version_fd_ < 0 || !enabled()) return s;
  int64_t now = now_ns();
  int64_t max_age_ns = int64_t{max_age.count()} * 1000000000;
  std::string base = resolved_dir_ + "/" + version_dir_name() + "/";
  for_each_name(version_fd_, [&](const std::string& shard) {
    if (shard.size() != 2 || !is_hex(shard)) return;
    Fd sfd(open_dir_at(version_fd_, shard.c_str()));
    if (sfd.get() < 0) return;
    for_each_name(sfd.get(), [&](const std::string& name) {
      struct stat st {};
      if (fstatat(sfd.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return;
      if (!S_ISREG(st.st_mode)) return;
      if (is_entry_name(name)) {
        s.entries.push_back(
            EntryInfo{name.substr(0, 32), base + shard + "/" + name, st.st_size, mtime_ns(st)});
        s.bytes += st.st_size;
      } else if (is_temp_name(name)) {
        if (remove_stale_temps && now - mtime_ns(st) >= max_age_ns &&
            unlinkat(sfd.get(), name.c_str(), 0) == 0) {
          stale_removed_.fetch_add(1);
        } else {
          s.temp_files++;
        }
      }
    });
  });
  std::sort(s.entries.begin(), s.entries.end(),
            [](const EntryInfo& a, const EntryInfo& b) { return a.key_hex < b.key_hex; });
  return s;
}

std::vector<EntryInfo> DiskCache::list() const { return scan(false, {}).entries; }

DiskCacheStats DiskCache::stats() const {
  DiskCacheStats st;
  st.hits = hits_.load();
  st.misses = misses_.load();
  st.stores = stores_.load();
  st.store_failures = store_failures_.load();
  st.bad_entries_removed = bad_removed_.load();
  st.evictions = evictions_.load();
  st.stale_temps_removed = stale_removed_.load();
  Scan s = scan(false, {});
  st.entries = static_cast<int64_t>(s.entries.size());
  st.bytes = s.bytes;
  st.temp_files = s.temp_files;
  return st;
}

int64_t DiskCache::clean_stale_temps(std::chrono::seconds max_age) {
  if (!writable()) return 0;
  int64_t before = stale_removed_.load();
  scan(true, max_age);
  return stale_removed_.load() - before;
}

int64_t DiskCache::evict(std::optional<int64_t> target_bytes) {
  if (!writable()) return 0;
  std::lock_guard<std::mutex> lock(mu_);
  return evict_locked(target_bytes);
}

int64_t DiskCache::evict_locked(std::optional<int64_t> target_bytes) {
  Scan s = scan(true, cfg_.stale_temp_age);
  unscanned_bytes_ = 0;
  if (!target_bytes && s.bytes <= cfg_.max_bytes) {
    estimated_bytes_ = s.bytes;
    return 0;
  }
  // Down to 90% of the cap, so that the next few publishes do not each trigger an eviction.
  int64_t target = target_bytes.value_or(cfg_.max_bytes / 10 * 9);
  std::sort(s.entries.begin(), s.entries.end(), [](const EntryInfo& a, const EntryInfo& b) {
    return a.last_used_ns != b.last_used_ns ? a.last_used_ns < b.last_used_ns
                                            : a.key_hex < b.key_hex;
  });
  int64_t evicted = 0;
  for (const EntryInfo& e : s.entries) {
    if (s.bytes <= target) break;
    Fd sfd(open_dir_at(version_fd_, e.key_hex.substr(0, 2).c_str()));
    std::string name = e.key_hex + kEntrySuffix;
    if (sfd.get() >= 0 && unlinkat(sfd.get(), name.c_str(), 0) == 0) {
      s.bytes -= e.bytes;
      ++evicted;
    }
  }
  evictions_.fetch_add(evicted);
  estimated_bytes_ = s.bytes;
  if (evicted > 0) {
    KILN_LOG_AT(debug) << "disk cache: evicted " << evicted << " entries";
  }
  return evicted;
}

VerifyResult DiskCache::verify() {
  VerifyResult r;
  for (const EntryInfo& e : list()) {
    ++r.checked;
    std::string name = e.key_hex + kEntrySuffix;
    Fd sfd(open_dir_at(version_fd_, e.key_hex.substr(0, 2).c_str()));
    if (sfd.get() < 0) continue;
    Fd fd(openat(sfd.get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (fd.get() < 0) continue;  // removed since the listing
    struct stat st {};
    std::vector<uint8_t> buf;
    std::string problem;
    EntryView view;
    std::vector<std::pair<std::string, std::string>> fields;
    if (fstat(fd.get(), &st) != 0 || !read_all(fd.get(), st, buf)) {
      problem = "unreadable or oversized";
    } else if (ParseStatus s = parse_entry(buf, view); s != ParseStatus::ok) {
      problem = parse_status_name(s);
    } else if (!parse_manifest(view.manifest, fields)) {
      problem = "malformed manifest";
    } else if (CacheKey k{digest_fields(fields), {}}; k.hex() != e.key_hex) {
      problem = "manifest does not hash to the entry's name";
    }
    if (problem.empty()) {
      ++r.ok;
      continue;
    }
    r.bad.emplace_back(e.key_hex, problem);
    remove_bad_entry(sfd.get(), name, st, problem.c_str());
  }
  return r;
}

int64_t DiskCache::clear() {
  if (!writable()) return 0;
  int64_t removed = 0;
  std::lock_guard<std::mutex> lock(mu_);
  // Every format version's entries go, not only the current one's.
  for_each_name(root_fd_, [&](const std::string& vname) {
    if (vname.size() < 2 || vname[0] != 'v' ||
        !std::all_of(vname.begin() + 1, vname.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return;
    }
    Fd vfd(open_dir_at(root_fd_, vname.c_str()));
    if (vfd.get() < 0) return;
    for_each_name(vfd.get(), [&](const std::string& shard) {
      if (shard.size() != 2 || !is_hex(shard)) return;
      Fd sfd(open_dir_at(vfd.get(), shard.c_str()));
      if (sfd.get() < 0) return;
      for_each_name(sfd.get(), [&](const std::string& name) {
        if ((is_entry_name(name) || is_temp_name(name)) &&
            unlinkat(sfd.get(), name.c_str(), 0) == 0) {
          ++removed;
        }
      });
      unlinkat(vfd.get(), shard.c_str(), AT_REMOVEDIR);  // fails harmlessly if a writer is in it
    });
  });
  estimated_bytes_ = 0;
  return removed;
}

std::optional<std::string> DiskCache::read_manifest(std::string_view hex_or_prefix,
                                                    std::string* error) const {
  auto fail = [&](std::string msg) -> std::optional<std::string> {
    if (error) *error = std::move(msg);
    return std::nullopt;
  };
  if (!enabled()) return fail("the disk cache is disabled: " + disabled_reason());
  std::string want(hex_or_prefix);
  if (want.size() < 4 || want.size() > 32 || !is_hex(want)) {
    return fail("'" + want + "' is not a key (4 to 32 lowercase hex digits)");
  }
  if (want.size() < 32) {
    std::string match;
    for (const EntryInfo& e : list()) {
      if (e.key_hex.starts_with(want)) {
        if (!match.empty()) return fail("'" + want + "' matches more than one entry");
        match = e.key_hex;
      }
    }
    if (match.empty()) return fail("no entry matches '" + want + "'");
    want = match;
  }
  Fd sfd(open_dir_at(version_fd_, want.substr(0, 2).c_str()));
  Fd fd(sfd.get() < 0
            ? -1
            : openat(sfd.get(), (want + kEntrySuffix).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (fd.get() < 0) return fail("no entry " + want);
  struct stat st {};
  std::vector<uint8_t> buf;
  std::string why;
  if (fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || !is_private(st, why)) {
    return fail("entry " + want + " is not a private regular file");
  }
  if (!read_all(fd.get(), st, buf)) return fail("cannot read entry " + want);
  EntryView view;
  if (ParseStatus s = parse_entry(buf, view); s != ParseStatus::ok) {
    return fail("entry " + want + " is bad: " + parse_status_name(s));
  }
  return std::string(view.manifest);
}

DiskCache& DiskCache::global() {
  static DiskCache cache(DiskCacheConfig::from_options(global_options()));
  return cache;
}

}  // namespace kiln::cache
