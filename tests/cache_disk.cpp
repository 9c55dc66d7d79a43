// The disk cache in one process: round trips, misses, every corruption detected and removed, LRU
// eviction, injected I/O failures, and the off and readonly modes.
#include <sys/stat.h>
#include <xxhash.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstring>
#include <random>

#include "cache/disk_cache.h"
#include "cache_test_util.h"

using namespace kiln::cache;
using namespace kiln::cache::testing;
using kiln::CacheMode;

TEST_CASE("disk cache round trip and misses", "[cache][disk]") {
  TempDir tmp;
  DiskCache cache(make_config(tmp.sub("c")));
  REQUIRE(cache.enabled());
  REQUIRE(cache.writable());

  CacheKey k = make_key(1);
  std::vector<uint8_t> payload = payload_for(1, 5000);
  CHECK_FALSE(cache.load(k, PayloadKind::llvm_object).has_value());
  REQUIRE(cache.store(k, PayloadKind::llvm_object, payload));
  auto got = cache.load(k, PayloadKind::llvm_object);
  REQUIRE(got.has_value());
  CHECK(*got == payload);

  // Layout: <dir>/v<format>/<2 hex>/<32 hex>.kc, files 0600, directories 0700.
  std::string hex = k.hex();
  std::string path = cache.dir() + "/v" + std::to_string(kEntryFormatVersion) + "/" +
                     hex.substr(0, 2) + "/" + hex + ".kc";
  CHECK(cache.entry_path(k) == path);
  struct stat st {};
  REQUIRE(stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  REQUIRE(stat(cache.dir().c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);

  CHECK_FALSE(cache.load(make_key(2), PayloadKind::llvm_object).has_value());
  CHECK_FALSE(cache.load(make_key(1, "other"), PayloadKind::llvm_object).has_value());

  // An empty payload is a valid entry.
  REQUIRE(cache.store(make_key(3), PayloadKind::x86_blob, {}));
  auto empty = cache.load(make_key(3), PayloadKind::x86_blob);
  REQUIRE(empty.has_value());
  CHECK(empty->empty());

  // A second process-like instance sees the same entries.
  DiskCache again(make_config(tmp.sub("c")));
  CHECK(again.load(k, PayloadKind::llvm_object) == payload);

  DiskCacheStats s = cache.stats();
  CHECK(s.hits == 2);
  CHECK(s.misses == 3);
  CHECK(s.stores == 2);
  CHECK(s.entries == 2);
  CHECK(s.temp_files == 0);
}

TEST_CASE("each key component changes the key, and a changed key misses", "[cache][disk]") {
  TempDir tmp;
  DiskCache cache(make_config(tmp.sub("c")));
  const std::vector<std::pair<std::string, std::string>> base = {
      {"kiln_version", "0.1.0"},   {"llvm_version", "19.1.7"},
      {"options", "dynamic=auto"}, {"cpu_features", "avx2 avx512f fma"},
      {"isa_cap", "none"},         {"graph", "g1"}};
  auto build = [](const std::vector<std::pair<std::string, std::string>>& fields) {
    KeyBuilder b;
    for (const auto& [n, v] : fields) b.add(n, v);
    return b.finish();
  };
  REQUIRE(cache.store(build(base), PayloadKind::llvm_object, payload_for(0, 64)));
  REQUIRE(cache.load(build(base), PayloadKind::llvm_object).has_value());
  for (size_t i = 0; i < base.size(); ++i) {
    auto changed = base;
    changed[i].second += "+changed";
    INFO("component " << base[i].first);
    CHECK(build(changed).hex() != build(base).hex());
    CHECK_FALSE(cache.load(build(changed), PayloadKind::llvm_object).has_value());
  }
}

TEST_CASE("corrupt entries (bit flips, truncation, zeroed bytes) are misses and removed",
          "[cache][disk][corruption]") {
  TempDir tmp;
  DiskCache cache(make_config(tmp.sub("c")));
  std::mt19937_64 rng(42);
  constexpr int kEntries = 200;
  int detected = 0;
  int kinds[3] = {0, 0, 0};
  for (int i = 0; i < kEntries; ++i) {
    CacheKey k = make_key(i);
    std::vector<uint8_t> payload = payload_for(i, 100 + (i * 37) % 3000);
    REQUIRE(cache.store(k, PayloadKind::llvm_object, payload));
    std::string path = cache.entry_path(k);
    std::vector<uint8_t> bytes = read_file(path);
    REQUIRE(!bytes.empty());
    int kind = i % 3;
    if (kind == 0) {  // one bit flipped anywhere
      size_t at = rng() % bytes.size();
      bytes[at] ^= static_cast<uint8_t>(1u << (rng() % 8));
    } else if (kind == 1) {  // truncated anywhere, including to nothing
      bytes.resize(rng() % bytes.size());
    } else {  // a run of bytes zeroed; the run must contain a nonzero byte to be a change
      for (;;) {
        size_t at = rng() % bytes.size();
        size_t len = std::min<size_t>(1 + rng() % 64, bytes.size() - at);
        bool changes = false;
        for (size_t j = at; j < at + len; ++j) changes |= bytes[j] != 0;
        if (!changes) continue;
        std::fill(bytes.begin() + at, bytes.begin() + at + len, 0);
        break;
      }
    }
    write_file(path, bytes);
    auto got = cache.load(k, PayloadKind::llvm_object);
    CHECK_FALSE(got.has_value());
    CHECK_FALSE(file_exists(path));
    if (!got && !file_exists(path)) {
      ++detected;
      ++kinds[kind];
    }
    // "Recompiled": stored again, and then served right.
    REQUIRE(cache.store(k, PayloadKind::llvm_object, payload));
    CHECK(cache.load(k, PayloadKind::llvm_object) == payload);
  }
  CHECK(detected == kEntries);
  CHECK(cache.stats().bad_entries_removed == kEntries);
  WARN("corruption: " << detected << "/" << kEntries << " detected and removed (bit flips "
                      << kinds[0] << ", truncations " << kinds[1] << ", zeroed runs " << kinds[2]
                      << ")");
}

TEST_CASE("wrong version, wrong manifest and wrong kind are misses and removed",
          "[cache][disk][corruption]") {
  TempDir tmp;
  DiskCache cache(make_config(tmp.sub("c")));
  CacheKey a = make_key(1), b = make_key(2);
  REQUIRE(cache.store(a, PayloadKind::llvm_object, payload_for(1, 300)));
  REQUIRE(cache.store(b, PayloadKind::llvm_object, payload_for(2, 300)));

  SECTION("a newer format version, checksum valid") {
    std::vector<uint8_t> bytes = read_file(cache.entry_path(a));
    bytes[8] = static_cast<uint8_t>(kEntryFormatVersion + 1);
    size_t body = bytes.size() - kEntryChecksumBytes;
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits(bytes.data(), body));
    std::memcpy(bytes.data() + body, c.digest, kEntryChecksumBytes);
    write_file(cache.entry_path(a), bytes);
    CHECK_FALSE(cache.load(a, PayloadKind::llvm_object).has_value());
    CHECK_FALSE(file_exists(cache.entry_path(a)));
  }
  SECTION("another key's valid entry under this key's name (a collision)") {
    write_file(cache.entry_path(a), read_file(cache.entry_path(b)));
    CHECK_FALSE(cache.load(a, PayloadKind::llvm_object).has_value());
    CHECK_FALSE(file_exists(cache.entry_path(a)));
    CHECK(cache.load(b, PayloadKind::llvm_object) == payload_for(2, 300));
  }
  SECTION("another payload kind") {
    CHECK_FALSE(cache.load(a, PayloadKind::x86_blob).has_value());
    CHECK_FALSE(file_exists(cache.entry_path(a)));
  }
  CHECK(cache.stats().bad_entries_removed == 1);
}

TEST_CASE("LRU eviction removes the least recently used entries", "[cache][disk][eviction]") {
  TempDir tmp;
  // Every entry has the same size: same-length manifests, same payload size.
  int64_t entry = static_cast<int64_t>(kEntryOverheadBytes + make_key(0).manifest().size() + 1000);
  DiskCache cache(make_config(tmp.sub("c"), 10 * entry + entry / 2));
  for (int i = 0; i < 10; ++i) {
    REQUIRE(cache.store(make_key(i), PayloadKind::llvm_object, payload_for(i, 1000)));
  }
  // Age them: entry i was last used 100 - i seconds ago.
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  for (int i = 0; i < 10; ++i) {
    timespec t[2] = {{now.tv_sec - 100 + i, 0}, {now.tv_sec - 100 + i, 0}};
    REQUIRE(utimensat(AT_FDCWD, cache.entry_path(make_key(i)).c_str(), t, 0) == 0);
  }
  // Using entry 0 makes it the most recently used.
  REQUIRE(cache.load(make_key(0), PayloadKind::llvm_object).has_value());
  // The 11th entry crosses the cap: eviction brings the total to <= 90% of it, oldest first.
  REQUIRE(cache.store(make_key(10), PayloadKind::llvm_object, payload_for(10, 1000)));
  CHECK(file_exists(cache.entry_path(make_key(0))));
  CHECK_FALSE(file_exists(cache.entry_path(make_key(1))));
  CHECK_FALSE(file_exists(cache.entry_path(make_key(2))));
  for (int i = 3; i <= 10; ++i) CHECK(file_exists(cache.entry_path(make_key(i))));
  DiskCacheStats s = cache.stats();
  CHECK(s.evictions == 2);
  CHECK(s.bytes == 9 * entry);
  CHECK(s.bytes <= cache.config().max_bytes);

  // An entry larger than the whole cap is not stored at all.
  CHECK_FALSE(cache.store(make_key(99), PayloadKind::llvm_object, payload_for(99, 20 * 1000)));
}

TEST_CASE("eviction does not break a reader that has the entry open", "[cache][disk][eviction]") {
  TempDir tmp;
  DiskCache cache(make_config(tmp.sub("c")));
  CacheKey k = make_key(7);
  std::vector<uint8_t> payload = payload_for(7, 200000);
  REQUIRE(cache.store(k, PayloadKind::llvm_object, payload));
  // A reader between open() and read(): the descriptor keeps the inode alive after the unlink.
  int fd = open(cache.entry_path(k).c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  CHECK(cache.evict(0) == 1);
  CHECK_FALSE(file_exists(cache.entry_path(k)));
  std::vector<uint8_t> bytes(kEntryOverheadBytes + k.manifest().size() + payload.size());
  REQUIRE(pread(fd, bytes.data(), bytes.size(), 0) == static_cast<ssize_t>(bytes.size()));
  close(fd);
  EntryView v;
  REQUIRE(parse_entry(bytes, v) == ParseStatus::ok);
  CHECK(std::vector<uint8_t>(v.payload.begin(), v.payload.end()) == payload);
  CHECK_FALSE(cache.load(k, PayloadKind::llvm_object).has_value());  // now a plain miss
}

TEST_CASE("publish failures (read-only fs, full disk, quota) warn once and return false",
          "[cache][disk][faults]") {
  // Running as root, chmod cannot make a directory unwritable and there is no way to mount a
  // read-only or full filesystem here, so the errors are injected at each publish step.
  TempDir tmp;
  DiskCache cache(make_config(tmp.sub("c")));
  CacheKey k = make_key(1);
  std::vector<uint8_t> payload = payload_for(1, 300000);  // several write chunks
  struct Case {
    StoreStep step;
    int err;
  };
  for (Case c : {Case{StoreStep::open_temp, EROFS}, Case{StoreStep::write, ENOSPC},
                 Case{StoreStep::fsync, EDQUOT}, Case{StoreStep::rename, EROFS}}) {
    int calls = 0;
    cache.set_fault_hook_for_testing([&](StoreStep s) {
      if (s != c.step) return 0;
      // Fail the second write chunk, so that a partial temp file exists when it fails.
      return (s == StoreStep::write && calls++ == 0) ? 0 : c.err;
    });
    bool stored = true;
    REQUIRE_NOTHROW(stored = cache.store(k, PayloadKind::llvm_object, payload));
    CHECK_FALSE(stored);
    CHECK_FALSE(cache.load(k, PayloadKind::llvm_object).has_value());
    CHECK(cache.stats().temp_files == 0);  // the failed writer cleaned up after itself
    CHECK(cache.enabled());
  }
  CHECK(cache.warning_count() == 1);
  CHECK(cache.stats().store_failures == 4);
  cache.set_fault_hook_for_testing(nullptr);
  REQUIRE(cache.store(k, PayloadKind::llvm_object, payload));
  CHECK(cache.load(k, PayloadKind::llvm_object) == payload);
}

TEST_CASE("a checksummed publish skips the fsync, a default one does not",
          "[cache][disk][faults]") {
  TempDir tmp;
  DiskCache cache(make_config(tmp.sub("c")));
  std::vector<uint8_t> payload = payload_for(2, 5000);
  int fsyncs = 0;
  cache.set_fault_hook_for_testing([&](StoreStep s) {
    if (s != StoreStep::fsync) return 0;
    ++fsyncs;
    return EIO;  // a failing fsync makes the publish fail, so it shows whether one ran
  });
  CacheKey k1 = make_key(1), k2 = make_key(2);
  CHECK(cache.store(k1, PayloadKind::x86_blob, payload, Durability::checksummed));
  CHECK(fsyncs == 0);
  CHECK(cache.load(k1, PayloadKind::x86_blob) == payload);
  CHECK_FALSE(cache.store(k2, PayloadKind::x86_blob, payload));
  CHECK(fsyncs == 1);
  CHECK_FALSE(cache.load(k2, PayloadKind::x86_blob).has_value());
  CHECK(cache.stats().temp_files == 0);
}

TEST_CASE("KILN_CACHE=off and readonly", "[cache][disk][modes]") {
  TempDir tmp;
  CacheKey k = make_key(1);
  std::vector<uint8_t> payload = payload_for(1, 100);

  SECTION("off: nothing is created, read or written") {
    DiskCacheConfig cfg = make_config(tmp.sub("c"));
    cfg.mode = CacheMode::off;
    DiskCache cache(cfg);
    CHECK_FALSE(cache.enabled());
    CHECK_FALSE(cache.store(k, PayloadKind::llvm_object, payload));
    CHECK_FALSE(cache.load(k, PayloadKind::llvm_object).has_value());
    CHECK_FALSE(file_exists(tmp.sub("c")));
    CHECK(cache.warning_count() == 0);
  }
  SECTION("readonly on a missing directory creates nothing") {
    DiskCacheConfig cfg = make_config(tmp.sub("c"));
    cfg.mode = CacheMode::readonly;
    DiskCache cache(cfg);
    CHECK_FALSE(cache.enabled());
    CHECK_FALSE(file_exists(tmp.sub("c")));
    CHECK(cache.warning_count() == 0);
  }
  SECTION("readonly loads, never stores, touches or removes") {
    {
      DiskCache writer(make_config(tmp.sub("c")));
      REQUIRE(writer.store(k, PayloadKind::llvm_object, payload));
      REQUIRE(writer.store(make_key(2), PayloadKind::llvm_object, payload));
    }
    DiskCacheConfig cfg = make_config(tmp.sub("c"));
    cfg.mode = CacheMode::readonly;
    DiskCache cache(cfg);
    REQUIRE(cache.enabled());
    CHECK_FALSE(cache.writable());
    CHECK(cache.load(k, PayloadKind::llvm_object) == payload);
    CHECK_FALSE(cache.store(make_key(3), PayloadKind::llvm_object, payload));
    CHECK_FALSE(file_exists(cache.entry_path(make_key(3))));
    std::string bad = cache.entry_path(make_key(2));
    std::vector<uint8_t> bytes = read_file(bad);
    bytes.back() ^= 1;
    write_file(bad, bytes);
    CHECK_FALSE(cache.load(make_key(2), PayloadKind::llvm_object).has_value());
    CHECK(file_exists(bad));
    CHECK(cache.clear() == 0);
    CHECK(cache.warning_count() == 0);
  }
}

TEST_CASE("stale temp files are cleaned by age and never block a publish", "[cache][disk]") {
  TempDir tmp;
  DiskCacheConfig cfg = make_config(tmp.sub("c"));
  cfg.stale_temp_age = std::chrono::seconds(60);
  DiskCache cache(cfg);
  CacheKey k = make_key(5);
  REQUIRE(cache.store(make_key(4), PayloadKind::llvm_object, payload_for(4, 10)));
  std::string shard = cache.entry_path(k).substr(0, cache.entry_path(k).rfind('/'));
  mkdir(shard.c_str(), 0700);
  // Leftovers of killed writers of this very key: one old, one recent.
  std::string old_tmp = shard + "/.tmp." + k.hex() + ".123.00000000deadbeef";
  std::string new_tmp = shard + "/.tmp." + k.hex() + ".124.00000000deadbeef";
  write_file(old_tmp, {1, 2, 3});
  write_file(new_tmp, {1, 2, 3});
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  timespec t[2] = {{now.tv_sec - 3600, 0}, {now.tv_sec - 3600, 0}};
  REQUIRE(utimensat(AT_FDCWD, old_tmp.c_str(), t, 0) == 0);

  REQUIRE(cache.store(k, PayloadKind::llvm_object, payload_for(5, 10)));  // not blocked
  CHECK(cache.load(k, PayloadKind::llvm_object) == payload_for(5, 10));
  CHECK(cache.clean_stale_temps(std::chrono::seconds(60)) == 1);
  CHECK_FALSE(file_exists(old_tmp));
  CHECK(file_exists(new_tmp));  // maybe a live writer: left alone
  CHECK(cache.stats().temp_files == 1);
  CHECK(cache.clean_stale_temps(std::chrono::seconds(0)) == 1);
  CHECK(cache.stats().temp_files == 0);
}

// Not run by default (timing is not asserted in CI): kiln_tests_cache "[.bench]".
TEST_CASE("disk hit latency", "[.bench]") {
  TempDir tmp;
  DiskCache cache(make_config(tmp.sub("c")));
  for (size_t size : {size_t{4} << 10, size_t{64} << 10, size_t{1} << 20}) {
    CacheKey k = make_key(static_cast<int>(size));
    REQUIRE(cache.store(k, PayloadKind::x86_blob, payload_for(1, size)));
    constexpr int kLoads = 2000;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kLoads; ++i) REQUIRE(cache.load(k, PayloadKind::x86_blob).has_value());
    double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
        kLoads;
    WARN("disk hit, " << size / 1024 << " KiB payload: " << us << " us per load");
  }
}
