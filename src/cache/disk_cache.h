// The on-disk kernel cache shared by processes: entries published atomically (unique temp file in
// the same directory, fsync unless the caller waives it, rename), verified on load (checksum,
// format version, manifest echo), size-capped with LRU eviction, and refused when the directory is
// not private to this user. A cache failure is never an error to the caller: it is a miss, or a
// store that returns false.
#pragma once

#include <kiln/options.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cache/entry_format.h"
#include "cache/key.h"

namespace kiln::cache {

struct DiskCacheConfig {
  std::string dir;  // the cache root; entries live in <dir>/v<format>/<2 hex>/<32 hex>.kc
  CacheMode mode = CacheMode::on;
  int64_t max_bytes = int64_t{1} << 30;  // size cap of the current format's entries
  // A temp file older than this is a killed writer's leftover and is removed when the directory is
  // scanned. Live writers finish in far less; a younger temp is left alone.
  std::chrono::seconds stale_temp_age{600};

  static DiskCacheConfig from_options(const GlobalOptions& o) {
    return DiskCacheConfig{o.cache_dir, o.cache, o.cache_max_bytes};
  }
};

// One entry as seen by `ls`: name, size, last use (the mtime, which a load bumps).
struct EntryInfo {
  std::string key_hex;
  std::string path;
  int64_t bytes = 0;
  int64_t last_used_ns = 0;  // since the epoch
};

// This process's counters, plus (from `stats()`) a scan of the directory.
struct DiskCacheStats {
  int64_t hits = 0;
  int64_t misses = 0;
  int64_t stores = 0;
  int64_t store_failures = 0;
  int64_t bad_entries_removed = 0;  // corrupt, truncated, wrong version, wrong manifest or kind
  int64_t evictions = 0;
  int64_t stale_temps_removed = 0;
  // From the scan:
  int64_t entries = 0;
  int64_t bytes = 0;
  int64_t temp_files = 0;
};

struct VerifyResult {
  int64_t checked = 0;
  int64_t ok = 0;
  std::vector<std::pair<std::string, std::string>> bad;  // (key hex, what is wrong); removed
};

// The steps of a publish, for the fault-injection hook.
enum class StoreStep : uint8_t { open_temp, write, fsync, rename };

// How far a publish goes to survive a crash. `fsynced` flushes the entry's bytes before its name
// appears, so a power loss cannot leave a published name over an empty or partial file.
// `checksummed` skips that fsync: such a file fails its checksum on load and is a miss (removed),
// which suits payloads that cost less to make again than the fsync costs on every publish (x86
// blobs: 0.01-0.02 ms of code generation against 0.3-0.6 ms for a store with its fsync, measured
// on the Xeon and the Zen 1 of RESULTS.md).
// Either way readers never see a partial entry while the system runs.
enum class Durability : uint8_t { fsynced, checksummed };

class DiskCache {
 public:
  // Checks (and in mode `on` creates, 0700) the directory. If it is unsafe or unusable the cache
  // warns once and disables itself; it never throws.
  explicit DiskCache(DiskCacheConfig cfg);
  ~DiskCache();
  DiskCache(const DiskCache&) = delete;
  DiskCache& operator=(const DiskCache&) = delete;

  bool enabled() const { return enabled_.load(std::memory_order_acquire); }
  bool writable() const { return enabled() && cfg_.mode == CacheMode::on; }
  const DiskCacheConfig& config() const { return cfg_; }
  // The resolved directory ("" when none), and why the cache is disabled ("" when enabled).
  const std::string& dir() const { return resolved_dir_; }
  std::string disabled_reason() const;

  // The payload of a valid entry whose stored manifest equals key.manifest() and whose kind is
  // `kind`. Any bad entry (corrupt, truncated, wrong version, manifest or kind) is removed and is a
  // miss. A symlink or a foreign-owned file in the cache disables the cache (one warning).
  std::optional<std::vector<uint8_t>> load(const CacheKey& key, PayloadKind kind);

  // Publishes atomically. Returns false (one warning per cache for I/O failures such as a
  // read-only directory, ENOSPC or EDQUOT) without throwing; readers never see a partial entry.
  bool store(const CacheKey& key, PayloadKind kind, std::span<const uint8_t> payload,
             Durability durability = Durability::fsynced);

  // For the command line and tests.
  std::vector<EntryInfo> list() const;
  DiskCacheStats stats() const;  // counters plus a directory scan
  VerifyResult verify();         // checks every entry; removes the bad ones when writable
  int64_t clear();               // removes every entry and temp file; returns files removed
  // Reads the manifest of an entry named by its full hex key or a unique prefix (>= 4 digits).
  std::optional<std::string> read_manifest(std::string_view hex_or_prefix,
                                           std::string* error = nullptr) const;
  // Scans the directory, removes stale temps, and evicts least recently used entries: down to
  // `target_bytes`, or with no target, down to 90% of max_bytes if the total exceeds max_bytes.
  // Runs by itself as entries are published. Returns the number of entries evicted.
  int64_t evict(std::optional<int64_t> target_bytes = std::nullopt);
  int64_t clean_stale_temps(std::chrono::seconds max_age);
  std::string entry_path(const CacheKey& key) const;
  int warning_count() const { return warnings_.load(); }

  // Test hook: called before each publish step; a nonzero return is taken as that step failing
  // with that errno (simulates EROFS, ENOSPC, EDQUOT where the test cannot make them real).
  using FaultHook = std::function<int(StoreStep)>;
  void set_fault_hook_for_testing(FaultHook hook) { fault_hook_ = std::move(hook); }

  // The process-wide cache, configured once from kiln::global_options().
  static DiskCache& global();

 private:
  struct Scan;
  int open_shard(std::string_view shard, bool create);
  bool check_opened(int fd, const char* what, const std::string& name, bool want_dir,
                    struct stat* out = nullptr);
  void remove_bad_entry(int shard_fd, const std::string& name, const struct stat& seen,
                        const char* why);
  void disable(const std::string& reason);
  void warn_once(std::atomic<bool>& flag, const std::string& message);
  int inject(StoreStep step) const { return fault_hook_ ? fault_hook_(step) : 0; }
  Scan scan(bool remove_stale_temps, std::chrono::seconds max_age) const;
  void account_store(int64_t bytes);
  int64_t evict_locked(std::optional<int64_t> target_bytes);

  DiskCacheConfig cfg_;
  std::string resolved_dir_;
  int root_fd_ = -1;     // the cache root, opened once after the safety checks
  int version_fd_ = -1;  // <root>/v<format>
  std::atomic<bool> enabled_{false};
  mutable std::mutex mu_;  // guards reason_ and the size estimate
  std::string reason_;
  int64_t estimated_bytes_ = -1;  // -1: not yet scanned by this process
  int64_t unscanned_bytes_ = 0;   // published by this process since its last scan

  std::atomic<bool> warned_unsafe_{false};
  std::atomic<bool> warned_io_{false};
  std::atomic<int> warnings_{0};
  FaultHook fault_hook_;

  mutable std::atomic<int64_t> hits_{0}, misses_{0}, stores_{0}, store_failures_{0},
      bad_removed_{0}, evictions_{0}, stale_removed_{0};
};

}  // namespace kiln::cache
