// The disk cache through the real JIT under stress (cache_jit_probe.h): 8 processes racing on one
// cache, and corrupted entries recompiled with the right result.
#include <thread>
#include <kiln/kiln.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cache/disk_cache.h"
#include "cache/entry_format.h"
#include "cache/key.h"
#include "cache_jit_probe.h"
#include "cache_test_util.h"
#include "needs_llvm.h"

using namespace kiln::cache;
using namespace kiln::cache::testing;

TEST_CASE("8 processes compile and run the same 100 kernels into one cache, 5 rounds",
          "[cache][jit][stress]" KILN_NEEDS_LLVM) {
  constexpr int kProcs = 8, kKernels = 100, kRounds = 5;
  TempDir tmp;
  REQUIRE(!tmp.path().empty());
  std::string dir = tmp.sub("cache");
  int64_t wrong = 0, errors = 0, store_failures = 0, bad_removed = 0;
  int64_t llvm_per_process = -1;
  std::ostringstream table;
  int64_t last_hits = 0, last_llvm = 0;
  for (int round = 0; round < kRounds; ++round) {
    std::vector<ProbeRun> runs;
    std::string go = tmp.path() + "/go" + std::to_string(round);
    for (int p = 0; p < kProcs; ++p) {
      ProbeEnv pe;
      pe.cache_dir = dir;
      pe.kernels = kKernels;
      // Half the processes take the kernels in one shared order (they compile and publish the same
      // key at the same moment), the other half each in an order of its own.
      pe.seed = p < kProcs / 2 ? 1 + round : 1000 + round * kProcs + p;
      pe.go_file = go;
      runs.push_back(
          start_probe(pe, tmp.path(), "r" + std::to_string(round) + "p" + std::to_string(p)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // let them load; then all start
    write_file(go, {});
    auto t0 = std::chrono::steady_clock::now();
    int64_t hits = 0, llvm = 0, compiled = 0;
    for (const ProbeRun& run : runs) {
      ProbeResult r = finish_probe(run, std::chrono::seconds(300));
      INFO("round " << round << ": " << describe(r));
      REQUIRE(r.exited_ok);
      CHECK(r["kernels_x86"] == 0);
      if (llvm_per_process < 0) llvm_per_process = r.llvm();
      CHECK(r.llvm() == llvm_per_process);
      CHECK(r.llvm() >= kKernels);
      wrong += r["wrong"];
      errors += r["errors"];
      store_failures += r["dc_store_failures"];
      bad_removed += r["dc_bad_removed"];
      hits += r["disk_hits"];
      llvm += r.llvm();
      compiled += r.llvm() - r["disk_hits"];
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    table << "\n  round " << round + 1 << ": " << hits << "/" << llvm << " disk hits, " << compiled
          << " kernels compiled, " << secs << " s from the start line to the last exit";
    last_hits = hits;
    last_llvm = llvm;
  }
  CHECK(wrong == 0);
  CHECK(errors == 0);
  CHECK(store_failures == 0);
  CHECK(bad_removed == 0);
  CHECK(last_hits == last_llvm);  // the final round: 100% disk hits

  DiskCache cache(make_config(dir));
  VerifyResult v = cache.verify();
  CHECK(v.bad.empty());
  CHECK(v.checked == llvm_per_process);  // one entry per distinct kernel
  CHECK(v.ok == v.checked);
  CHECK(cache.stats().temp_files == 0);
  WARN(kProcs << " processes x " << kKernels << " functions (" << llvm_per_process
              << " LLVM kernels each) x " << kRounds << " rounds:" << table.str() << "\n  " << wrong
              << " wrong results, " << errors << " errors, verify: " << v.checked << " checked, "
              << v.bad.size() << " corrupt");
}

namespace {

// Reads an entry, lets `edit` change its bytes, writes it back in place.
template <typename Edit>
void edit_entry(const std::string& path, Edit&& edit) {
  std::vector<uint8_t> bytes = read_file(path);
  REQUIRE(bytes.size() > kEntryOverheadBytes);
  edit(bytes);
  write_file(path, bytes);
}

}  // namespace

TEST_CASE("a corrupted LLVM object entry is recompiled with the right result and no error",
          "[cache][jit][corrupt]" KILN_NEEDS_LLVM) {
  constexpr int kKernels = 6;
  TempDir tmp;
  ProbeEnv pe = probe_env(tmp, kKernels);
  ProbeResult cold = run_probe(pe, tmp.path(), "cold");
  check_clean(cold, kKernels);
  const int64_t n = cold.llvm();

  DiskCache view(make_config(pe.cache_dir));
  auto entries = view.list();
  REQUIRE(static_cast<int64_t>(entries.size()) == n);
  std::sort(entries.begin(), entries.end(),
            [](const EntryInfo& a, const EntryInfo& b) { return a.key_hex < b.key_hex; });
  const std::string victim = entries.front().path;
  {
    std::vector<uint8_t> bytes = read_file(victim);
    EntryView ev;
    REQUIRE(parse_entry(bytes, ev) == ParseStatus::ok);
    REQUIRE(ev.kind == PayloadKind::llvm_object);
    REQUIRE(ev.payload.size() > 4);
    REQUIRE(std::memcmp(ev.payload.data(),
                        "\x7f"
                        "ELF",
                        4) == 0);  // a real ELF object
  }

  SECTION("a flipped byte in the object (checksum mismatch)") {
    edit_entry(victim, [](std::vector<uint8_t>& b) {
      EntryHeader h;
      REQUIRE(parse_entry_header(b, h) == ParseStatus::ok);
      size_t at = kEntryHeaderBytes + h.manifest_size + h.payload_size / 2;
      REQUIRE(at < b.size() - kEntryChecksumBytes);
      b[at] ^= 0x40;
    });
    ProbeResult r = run_probe(pe, tmp.path(), "flipped");
    check_clean(r, kKernels);
    CHECK(r["disk_hits"] == n - 1);  // the corrupt one was recompiled
    CHECK(r["dc_bad_removed"] == 1);
    CHECK(r["dc_stores"] == 1);  // and published again
    ProbeResult after = run_probe(pe, tmp.path(), "after-flip");
    check_clean(after, kKernels);
    CHECK(after["disk_hits"] == n);
    WARN("flipped byte in 1 of " << n << " entries: next process " << r["disk_hits"]
                                 << " disk hits, " << r["dc_bad_removed"] << " bad entry removed, "
                                 << r["wrong"] << " wrong, " << r["errors"] << " errors; then "
                                 << after["disk_hits"] << "/" << n << " hits");
  }

  SECTION("a well-formed entry whose object does not link") {
    // The checksum is right (as if written by a broken toolchain): the link fails and the kernel is
    // recompiled.
    edit_entry(victim, [](std::vector<uint8_t>& b) {
      EntryView ev;
      REQUIRE(parse_entry(b, ev) == ParseStatus::ok);
      std::string manifest(ev.manifest);
      std::vector<uint8_t> garbage(ev.payload.begin(), ev.payload.begin() + ev.payload.size() / 3);
      for (size_t i = 64; i < garbage.size(); ++i) garbage[i] = static_cast<uint8_t>(i * 131);
      b = encode_entry(PayloadKind::llvm_object, manifest, garbage);
    });
    ProbeResult r = run_probe(pe, tmp.path(), "garbage");
    check_clean(r, kKernels);
    CHECK(r["disk_hits"] == n - 1);
    ProbeResult after = run_probe(pe, tmp.path(), "after-garbage");
    check_clean(after, kKernels);
    CHECK(after["disk_hits"] == n);  // the recompiled object replaced the bad one
    WARN("valid entry with an unlinkable object: next process "
         << r["disk_hits"] << "/" << n << " disk hits, " << r["wrong"] << " wrong, " << r["errors"]
         << " errors; then " << after["disk_hits"] << "/" << n);
  }
}
