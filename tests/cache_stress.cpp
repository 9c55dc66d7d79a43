// Processes sharing one cache directory: concurrent publishers and readers, eviction under load,
// and writers killed with SIGKILL mid-publish. Children report through shared memory and _exit;
// the assertions run in the parent.
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <numeric>
#include <random>

#include "cache/disk_cache.h"
#include "cache_test_util.h"

using namespace kiln::cache;
using namespace kiln::cache::testing;

namespace {

template <typename T>
T* map_shared() {
  void* p = mmap(nullptr, sizeof(T), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  REQUIRE(p != MAP_FAILED);
  return new (p) T();
}

template <typename T>
void unmap_shared(T* p) {
  p->~T();
  munmap(p, sizeof(T));
}

// Runs fn in a child process; the child exits 0 unless fn throws.
template <typename Fn>
pid_t spawn(Fn&& fn) {
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int rc = 0;
    try {
      fn();
    } catch (...) {
      rc = 1;
    }
    _exit(rc);
  }
  return pid;
}

bool exited_cleanly(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

size_t shared_size(int i) { return 512 + static_cast<size_t>(i) * 997 % 32768; }

struct SharedCounts {
  static constexpr int kMaxRounds = 8;
  std::atomic<int64_t> wrong{0}, bad_entries{0}, store_failures{0};
  std::atomic<int64_t> hits[kMaxRounds] = {}, misses[kMaxRounds] = {};
};

}  // namespace

TEST_CASE("8 processes publish and load the same 100 keys, 5 rounds", "[cache][stress]") {
  constexpr int kProcs = 8, kKeys = 100, kRounds = 5;
  TempDir tmp;
  std::string dir = tmp.sub("c");
  auto* sh = map_shared<SharedCounts>();
  std::vector<pid_t> pids;
  for (int p = 0; p < kProcs; ++p) {
    pids.push_back(spawn([&, p] {
      DiskCache cache(make_config(dir));
      std::mt19937 rng(static_cast<unsigned>(p));
      std::vector<int> order(kKeys);
      std::iota(order.begin(), order.end(), 0);
      for (int round = 0; round < kRounds; ++round) {
        std::shuffle(order.begin(), order.end(), rng);
        for (int i : order) {
          CacheKey key = make_key(i);
          std::vector<uint8_t> expected = payload_for(i, shared_size(i));
          if (auto got = cache.load(key, PayloadKind::x86_blob)) {
            sh->hits[round]++;
            if (*got != expected) sh->wrong++;
          } else {
            sh->misses[round]++;
            if (!cache.store(key, PayloadKind::x86_blob, expected)) sh->store_failures++;
          }
        }
      }
      sh->bad_entries += cache.stats().bad_entries_removed;
    }));
  }
  for (pid_t pid : pids) CHECK(exited_cleanly(pid));
  CHECK(sh->wrong == 0);
  CHECK(sh->bad_entries == 0);
  CHECK(sh->store_failures == 0);
  CHECK(sh->hits[kRounds - 1] == kProcs * kKeys);  // final round: 100% disk hits
  CHECK(sh->misses[kRounds - 1] == 0);
  int64_t first_round_misses = sh->misses[0];
  CHECK(first_round_misses >= kKeys);

  DiskCache cache(make_config(dir));
  VerifyResult v = cache.verify();
  CHECK(v.checked == kKeys);
  CHECK(v.ok == kKeys);
  CHECK(cache.stats().temp_files == 0);
  WARN("8 processes x 100 keys x 5 rounds: " << first_round_misses << " first-round misses, "
                                             << sh->hits[kRounds - 1] << "/" << kProcs * kKeys
                                             << " last-round hits, 0 wrong, 0 corrupt");
  unmap_shared(sh);
}

TEST_CASE("eviction under concurrent loads never yields a bad or wrong entry", "[cache][stress]") {
  constexpr int kProcs = 4, kKeys = 100, kRounds = 3;
  TempDir tmp;
  std::string dir = tmp.sub("c");
  int64_t total = 0;
  for (int i = 0; i < kKeys; ++i) total += static_cast<int64_t>(shared_size(i) + 200);
  DiskCacheConfig cfg = make_config(dir, total / 3);  // a third fits: eviction runs constantly
  auto* sh = map_shared<SharedCounts>();
  std::vector<pid_t> pids;
  for (int p = 0; p < kProcs; ++p) {
    pids.push_back(spawn([&, p] {
      DiskCache cache(cfg);
      std::mt19937 rng(static_cast<unsigned>(100 + p));
      for (int n = 0; n < kRounds * kKeys; ++n) {
        int i = static_cast<int>(rng() % kKeys);
        std::vector<uint8_t> expected = payload_for(i, shared_size(i));
        if (auto got = cache.load(make_key(i), PayloadKind::x86_blob)) {
          sh->hits[0]++;
          if (*got != expected) sh->wrong++;
        } else {
          sh->misses[0]++;
          if (!cache.store(make_key(i), PayloadKind::x86_blob, expected)) sh->store_failures++;
        }
      }
      sh->bad_entries += cache.stats().bad_entries_removed;
      sh->misses[1] += cache.stats().evictions;
    }));
  }
  for (pid_t pid : pids) CHECK(exited_cleanly(pid));
  CHECK(sh->wrong == 0);
  CHECK(sh->bad_entries == 0);
  CHECK(sh->store_failures == 0);
  CHECK(sh->misses[1] > 0);  // evictions happened
  DiskCache cache(cfg);
  // Each process rescans after publishing a tenth of the cap (and evicts if over it), so the
  // total overshoots the cap by at most that much, plus one entry, per concurrent writer.
  int64_t bound = cfg.max_bytes + kProcs * (cfg.max_bytes / 10 + 33000);
  CHECK(cache.stats().bytes <= bound);
  CHECK(cache.evict() >= 0);
  CHECK(cache.stats().bytes <= cfg.max_bytes);
  WARN("eviction under load: " << sh->hits[0] << " hits, " << sh->misses[0] << " misses, "
                               << sh->misses[1] << " evictions, 0 wrong, 0 corrupt");
  unmap_shared(sh);
}

namespace {

struct KillCounts {
  std::atomic<bool> stop{false};
  std::atomic<int64_t> reader_loads{0}, reader_hits{0}, reader_wrong{0}, reader_bad{0};
  std::atomic<int64_t> writer_stores{0};
};

constexpr int kKillKeys = 8;
size_t kill_size(int i) { return (size_t{256} << 10) + static_cast<size_t>(i) * (64 << 10); }

}  // namespace

TEST_CASE("writers killed with SIGKILL while publishing, 200 times", "[cache][stress][kill]") {
  constexpr int kKills = 200;
  TempDir tmp;
  DiskCacheConfig cfg = make_config(tmp.sub("c"));
  auto* sh = map_shared<KillCounts>();
  std::vector<std::vector<uint8_t>> expected;
  for (int i = 0; i < kKillKeys; ++i) expected.push_back(payload_for(i, kill_size(i)));

  DiskCache cache(cfg);
  REQUIRE(cache.enabled());
  // A reader in its own process, loading every key throughout.
  pid_t reader = spawn([&] {
    DiskCache rc(cfg);
    while (!sh->stop) {
      for (int i = 0; i < kKillKeys; ++i) {
        sh->reader_loads++;
        if (auto got = rc.load(make_key(i), PayloadKind::llvm_object)) {
          sh->reader_hits++;
          if (*got != expected[i]) sh->reader_wrong++;
        }
      }
      usleep(200);
    }
    sh->reader_bad += rc.stats().bad_entries_removed;
  });

  std::mt19937 rng(7);
  int killed = 0, next_writer_ok = 0;
  int64_t wrong = 0;
  for (int iter = 0; iter < kKills; ++iter) {
    unsigned seed = static_cast<unsigned>(rng());
    pid_t writer = fork();
    REQUIRE(writer >= 0);
    if (writer == 0) {
      DiskCache wc(cfg);
      std::mt19937 wrng(seed);
      // Slow the writes down a little so that kills land inside publishes, not between them.
      wc.set_fault_hook_for_testing([&](StoreStep s) {
        if (s == StoreStep::write) usleep(wrng() % 100);
        return 0;
      });
      for (int j = iter;; ++j) {
        if (wc.store(make_key(j % kKillKeys), PayloadKind::llvm_object, expected[j % kKillKeys])) {
          sh->writer_stores++;
        }
      }
    }
    usleep(200 + rng() % 12000);
    kill(writer, SIGKILL);
    int status = 0;
    REQUIRE(waitpid(writer, &status, 0) == writer);
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) ++killed;

    // The next writer succeeds, and every entry present is whole and right.
    int k = iter % kKillKeys;
    if (cache.store(make_key(k), PayloadKind::llvm_object, expected[k])) ++next_writer_ok;
    for (int i = 0; i < kKillKeys; ++i) {
      auto got = cache.load(make_key(i), PayloadKind::llvm_object);
      if (got && *got != expected[i]) ++wrong;
    }
  }
  sh->stop = true;
  CHECK(exited_cleanly(reader));

  CHECK(killed == kKills);
  CHECK(next_writer_ok == kKills);
  CHECK(wrong == 0);
  CHECK(cache.stats().bad_entries_removed == 0);
  CHECK(sh->reader_wrong == 0);
  CHECK(sh->reader_bad == 0);
  CHECK(sh->reader_hits > 0);
  // Killed writers leave temp files behind; they never blocked a publish above, and the age-based
  // cleaner removes them (age 0 here because every writer is dead).
  int64_t leftover = cache.stats().temp_files;
  CHECK(cache.clean_stale_temps(std::chrono::seconds(0)) == leftover);
  CHECK(cache.stats().temp_files == 0);
  CHECK(cache.verify().bad.empty());
  WARN("SIGKILL stress: " << killed << " writers killed (" << leftover
                          << " mid-publish, left a temp file), " << sh->writer_stores
                          << " publishes completed by killed writers, " << next_writer_ok
                          << " next-writer publishes ok; reader: " << sh->reader_loads << " loads, "
                          << sh->reader_hits << " hits, 0 partial or wrong");
  unmap_shared(sh);
}
