// The disk cache as a security boundary: a directory (or ancestor) another user owns or can write,
// and symlinks inside the cache, make kiln load nothing, warn once and run without a disk cache.
// The tests run as root, so "another user" is simulated by chown to uid 65534 (nobody).
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>

#include "cache/disk_cache.h"
#include "cache_test_util.h"

using namespace kiln::cache;
using namespace kiln::cache::testing;

namespace {

constexpr uid_t kOtherUid = 65534;

// Publishes one entry with a fresh cache, and returns its path.
std::string publish(const std::string& dir, int i) {
  DiskCache cache(make_config(dir));
  REQUIRE(cache.enabled());
  REQUIRE(cache.store(make_key(i), PayloadKind::llvm_object, payload_for(i, 100)));
  return cache.entry_path(make_key(i));
}

// A cache on `dir` must refuse: disabled, one warning, nothing loaded or stored.
void require_refused(const std::string& dir, int i = 1) {
  DiskCache cache(make_config(dir));
  CHECK_FALSE(cache.enabled());
  CHECK(cache.warning_count() == 1);
  CHECK_FALSE(cache.disabled_reason().empty());
  CHECK_FALSE(cache.load(make_key(i), PayloadKind::llvm_object).has_value());
  CHECK_FALSE(cache.store(make_key(i + 1000), PayloadKind::llvm_object, payload_for(i, 10)));
  CHECK(cache.warning_count() == 1);
}

}  // namespace

TEST_CASE("the cache directory is created 0700, ancestors included", "[cache][permissions]") {
  TempDir tmp;
  mode_t old = umask(022);
  DiskCache cache(make_config(tmp.sub("a/b/kiln")));
  umask(old);
  REQUIRE(cache.enabled());
  for (const char* p : {"a", "a/b", "a/b/kiln"}) {
    struct stat st {};
    REQUIRE(stat(tmp.sub(p).c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0700);
  }
  CHECK(cache.warning_count() == 0);
}

TEST_CASE("a directory owned by another user is refused", "[cache][permissions]") {
  TempDir tmp;
  publish(tmp.sub("c"), 1);
  REQUIRE(chown(tmp.sub("c").c_str(), kOtherUid, kOtherUid) == 0);
  require_refused(tmp.sub("c"));
}

TEST_CASE("an ancestor owned by another user is refused", "[cache][permissions]") {
  TempDir tmp;
  REQUIRE(mkdir(tmp.sub("p").c_str(), 0755) == 0);
  publish(tmp.sub("p/c"), 1);
  REQUIRE(chown(tmp.sub("p").c_str(), kOtherUid, kOtherUid) == 0);
  require_refused(tmp.sub("p/c"));
}

TEST_CASE("group- and world-writable directories are refused", "[cache][permissions]") {
  TempDir tmp;
  publish(tmp.sub("p/c"), 1);
  SECTION("group-writable cache dir") {
    REQUIRE(chmod(tmp.sub("p/c").c_str(), 0770) == 0);
    require_refused(tmp.sub("p/c"));
  }
  SECTION("world-writable cache dir") {
    REQUIRE(chmod(tmp.sub("p/c").c_str(), 0777) == 0);
    require_refused(tmp.sub("p/c"));
  }
  SECTION("world-writable sticky cache dir: still refused, others could add entries") {
    REQUIRE(chmod(tmp.sub("p/c").c_str(), 01777) == 0);
    require_refused(tmp.sub("p/c"));
  }
  SECTION("world-writable ancestor without the sticky bit") {
    REQUIRE(chmod(tmp.sub("p").c_str(), 0777) == 0);
    require_refused(tmp.sub("p/c"));
  }
  SECTION("group-writable ancestor") {
    REQUIRE(chmod(tmp.sub("p").c_str(), 0770) == 0);
    require_refused(tmp.sub("p/c"));
  }
  SECTION("a world-writable sticky ancestor (like /tmp) is fine") {
    REQUIRE(chmod(tmp.sub("p").c_str(), 01777) == 0);
    DiskCache cache(make_config(tmp.sub("p/c")));
    CHECK(cache.enabled());
    CHECK(cache.load(make_key(1), PayloadKind::llvm_object).has_value());
  }
  SECTION("a group-writable shard directory disables the cache on first use") {
    DiskCache cache(make_config(tmp.sub("p/c")));
    REQUIRE(cache.enabled());
    std::string entry = cache.entry_path(make_key(1));
    REQUIRE(chmod(entry.substr(0, entry.rfind('/')).c_str(), 0770) == 0);
    CHECK_FALSE(cache.load(make_key(1), PayloadKind::llvm_object).has_value());
    CHECK_FALSE(cache.enabled());
    CHECK(cache.warning_count() == 1);
  }
}

TEST_CASE("entries owned by another user or writable by others are refused",
          "[cache][permissions]") {
  TempDir tmp;
  std::string entry = publish(tmp.sub("c"), 1);
  SECTION("foreign owner") { REQUIRE(chown(entry.c_str(), kOtherUid, kOtherUid) == 0); }
  SECTION("group-writable") { REQUIRE(chmod(entry.c_str(), 0660) == 0); }
  DiskCache cache(make_config(tmp.sub("c")));
  REQUIRE(cache.enabled());
  CHECK_FALSE(cache.load(make_key(1), PayloadKind::llvm_object).has_value());
  CHECK_FALSE(cache.enabled());
  CHECK(cache.warning_count() == 1);
  CHECK(file_exists(entry));  // evidence is left for the user to inspect
}

TEST_CASE("symlinks inside the cache are refused", "[cache][permissions]") {
  TempDir tmp;
  std::string entry = publish(tmp.sub("c"), 1);
  std::string shard = entry.substr(0, entry.rfind('/'));
  std::string version = shard.substr(0, shard.rfind('/'));

  SECTION("a symlinked entry (to a valid entry elsewhere)") {
    REQUIRE(rename(entry.c_str(), tmp.sub("elsewhere.kc").c_str()) == 0);
    REQUIRE(symlink(tmp.sub("elsewhere.kc").c_str(), entry.c_str()) == 0);
    DiskCache cache(make_config(tmp.sub("c")));
    REQUIRE(cache.enabled());
    CHECK_FALSE(cache.load(make_key(1), PayloadKind::llvm_object).has_value());
    CHECK_FALSE(cache.enabled());
    CHECK(cache.warning_count() == 1);
    CHECK_FALSE(cache.load(make_key(1), PayloadKind::llvm_object).has_value());
    CHECK(cache.warning_count() == 1);
  }
  SECTION("a symlinked shard directory") {
    REQUIRE(rename(shard.c_str(), tmp.sub("shard").c_str()) == 0);
    REQUIRE(symlink(tmp.sub("shard").c_str(), shard.c_str()) == 0);
    DiskCache cache(make_config(tmp.sub("c")));
    REQUIRE(cache.enabled());
    CHECK_FALSE(cache.load(make_key(1), PayloadKind::llvm_object).has_value());
    CHECK_FALSE(cache.enabled());
    CHECK(cache.warning_count() == 1);
  }
  SECTION("a symlinked version directory") {
    REQUIRE(rename(version.c_str(), tmp.sub("version").c_str()) == 0);
    REQUIRE(symlink(tmp.sub("version").c_str(), version.c_str()) == 0);
    require_refused(tmp.sub("c"));
  }
}

TEST_CASE("a symlinked cache root is resolved and the target checked", "[cache][permissions]") {
  TempDir tmp;
  publish(tmp.sub("real"), 1);
  REQUIRE(symlink(tmp.sub("real").c_str(), tmp.sub("link").c_str()) == 0);
  {
    DiskCache cache(make_config(tmp.sub("link")));
    REQUIRE(cache.enabled());
    char real[PATH_MAX];
    REQUIRE(realpath(tmp.sub("real").c_str(), real));
    CHECK(cache.dir() == real);
    CHECK(cache.load(make_key(1), PayloadKind::llvm_object).has_value());
  }
  // The link leads into a directory another user owns: refused.
  REQUIRE(chown(tmp.sub("real").c_str(), kOtherUid, kOtherUid) == 0);
  require_refused(tmp.sub("link"));
}

TEST_CASE("no configured directory disables the cache with a warning", "[cache][permissions]") {
  DiskCache cache(make_config(""));
  CHECK_FALSE(cache.enabled());
  CHECK(cache.warning_count() == 1);
  CHECK_FALSE(cache.store(make_key(1), PayloadKind::llvm_object, payload_for(1, 1)));
}
