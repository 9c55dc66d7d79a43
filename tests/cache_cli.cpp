// `kiln cache ls|stats|verify|clear|explain`, run against a test directory.
#include "cache/cache_cli.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <sstream>

#include "cache_test_util.h"

using namespace kiln::cache;
using namespace kiln::cache::testing;

namespace {

struct CliResult {
  int rc;
  std::string out, err;
};

CliResult run(const DiskCacheConfig& cfg, std::vector<std::string> args) {
  std::ostringstream out, err;
  int rc = run_cache_cli(args, cfg, out, err);
  return {rc, out.str(), err.str()};
}

CacheKey llvm_key(const std::string& llvm, const std::string& isa) {
  return KeyBuilder()
      .add("kiln_version", "0.1.0")
      .add("llvm_version", llvm)
      .add("isa_cap", isa)
      .add("graph", "g42")
      .finish();
}

size_t count_lines(const std::string& s) {
  return static_cast<size_t>(std::count(s.begin(), s.end(), '\n'));
}

}  // namespace

TEST_CASE("kiln cache subcommands", "[cache][cli]") {
  TempDir tmp;
  DiskCacheConfig cfg = make_config(tmp.sub("c"));
  CacheKey a = llvm_key("19.1.7", "none"), b = llvm_key("18.1.8", "avx2"),
           c = llvm_key("19.1.7", "avx2");
  {
    DiskCache cache(cfg);
    REQUIRE(cache.store(a, PayloadKind::llvm_object, payload_for(1, 100)));
    REQUIRE(cache.store(b, PayloadKind::x86_blob, payload_for(2, 200)));
    REQUIRE(cache.store(c, PayloadKind::cubin, payload_for(3, 300)));
  }

  CliResult ls = run(cfg, {"ls"});
  CHECK(ls.rc == 0);
  CHECK(count_lines(ls.out) == 3);
  CHECK(ls.out.find(a.hex()) != std::string::npos);
  CHECK(ls.out.find("x86_blob") != std::string::npos);
  CHECK(ls.out.find("cubin") != std::string::npos);

  CliResult stats = run(cfg, {"stats"});
  CHECK(stats.rc == 0);
  CHECK(stats.out.find("entries: 3\n") != std::string::npos);
  CHECK(stats.out.find("temp files: 0\n") != std::string::npos);

  CliResult explain = run(cfg, {"explain", a.hex(), b.hex()});
  CHECK(explain.rc == 0);
  CHECK(explain.out == "llvm_version: 19.1.7  |  18.1.8\nisa_cap: none  |  avx2\n");
  // Unique prefixes work; identical manifests say so.
  CliResult prefix = run(cfg, {"explain", a.hex().substr(0, 8), c.hex().substr(0, 8)});
  CHECK(prefix.out == "isa_cap: none  |  avx2\n");
  CHECK(run(cfg, {"explain", a.hex(), a.hex()}).out == "the manifests are identical\n");
  CliResult missing = run(cfg, {"explain", a.hex(), "0000000000000000000000000000dead"});
  CHECK(missing.rc == 1);
  CHECK(missing.err.find("no entry") != std::string::npos);

  CHECK(run(cfg, {"verify"}).out == "checked 3 entries: 3 ok, 0 bad\n");
  {
    DiskCache cache(cfg);
    std::vector<uint8_t> bytes = read_file(cache.entry_path(b));
    bytes[bytes.size() / 2] ^= 4;
    write_file(cache.entry_path(b), bytes);
  }
  CliResult verify = run(cfg, {"verify"});
  CHECK(verify.rc == 1);
  CHECK(verify.out.find("bad " + b.hex() + ": checksum mismatch (removed)") != std::string::npos);
  CHECK(verify.out.find("checked 3 entries: 2 ok, 1 bad") != std::string::npos);
  CHECK(count_lines(run(cfg, {"ls"}).out) == 2);

  CliResult clear = run(cfg, {"clear"});
  CHECK(clear.rc == 0);
  CHECK(clear.out.find("removed 2 files") != std::string::npos);
  CHECK(run(cfg, {"ls"}).out.empty());

  CHECK(run(cfg, {}).rc == 2);
  CHECK(run(cfg, {"frobnicate"}).rc == 2);
  CHECK(run(cfg, {"explain", a.hex()}).rc == 2);
  CHECK(run(cfg, {"help"}).rc == 0);
}

TEST_CASE("kiln cache on a missing directory creates nothing", "[cache][cli]") {
  TempDir tmp;
  DiskCacheConfig cfg = make_config(tmp.sub("none"));
  CHECK(run(cfg, {"ls"}).rc == 0);
  CHECK(run(cfg, {"stats"}).out.find("not usable") != std::string::npos);
  CHECK(run(cfg, {"verify"}).rc == 0);
  CHECK(run(cfg, {"clear"}).out.find("no disk cache") != std::string::npos);
  CHECK_FALSE(file_exists(tmp.sub("none")));
}
