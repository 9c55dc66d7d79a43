#include "cache/cache_cli.h"

#include <fcntl.h>
#include <unistd.h>

#include <ctime>
#include <iomanip>
#include <map>
#include <ostream>

namespace kiln::cache {

namespace {

const char* kUsage =
    "usage: kiln cache ls | stats | verify | clear | explain KEY1 KEY2\n"
    "  ls       list entries: key, bytes, last used, payload kind\n"
    "  stats    entry count, total size against the cap, leftover temp files\n"
    "  verify   check every entry's format, checksum and manifest; remove bad ones\n"
    "  clear    remove every entry\n"
    "  explain  print the manifest fields that differ between two entries (keys or prefixes)\n";

const char* mode_name(CacheMode m) {
  switch (m) {
    case CacheMode::on:
      return "on";
    case CacheMode::off:
      return "off";
    case CacheMode::readonly:
      return "readonly";
  }
  return "?";
}

std::string format_time(int64_t ns) {
  time_t secs = static_cast<time_t>(ns / 1000000000);
  tm local{};
  localtime_r(&secs, &local);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &local);
  return buf;
}

std::string payload_kind_of(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return "?";
  uint8_t header[kEntryHeaderBytes];
  ssize_t n = pread(fd, header, sizeof header, 0);
  close(fd);
  EntryHeader h;
  if (n != static_cast<ssize_t>(sizeof header) ||
      parse_entry_header(std::span<const uint8_t>(header, sizeof header), h) != ParseStatus::ok) {
    return "bad";
  }
  return payload_kind_name(static_cast<PayloadKind>(h.kind));
}

// verify and clear open the cache writable, which would create a missing directory: check first.
bool report_missing(const DiskCacheConfig& cfg, std::ostream& out) {
  if (!cfg.dir.empty() && access(cfg.dir.c_str(), F_OK) == 0) return false;
  out << "no disk cache at " << (cfg.dir.empty() ? "(no directory configured)" : cfg.dir) << "\n";
  return true;
}

DiskCacheConfig with_mode(DiskCacheConfig cfg, CacheMode mode) {
  cfg.mode = mode;
  return cfg;
}

int cmd_ls(const DiskCacheConfig& cfg, std::ostream& out, std::ostream& err) {
  DiskCache cache(with_mode(cfg, CacheMode::readonly));
  if (!cache.enabled()) {
    out << "no disk cache at " << cfg.dir << " (" << cache.disabled_reason() << ")\n";
    return 0;
  }
  for (const EntryInfo& e : cache.list()) {
    out << e.key_hex << "  " << std::setw(10) << e.bytes << "  " << format_time(e.last_used_ns)
        << "  " << payload_kind_of(e.path) << "\n";
  }
  return 0;
}

int cmd_stats(const DiskCacheConfig& cfg, std::ostream& out, std::ostream& err) {
  DiskCache cache(with_mode(cfg, CacheMode::readonly));
  out << "directory: " << (cache.dir().empty() ? cfg.dir : cache.dir()) << "\n";
  out << "mode: " << mode_name(cfg.mode) << "\n";
  if (!cache.enabled()) {
    out << "status: not usable (" << cache.disabled_reason() << ")\n";
    return 0;
  }
  DiskCacheStats s = cache.stats();
  double pct = cfg.max_bytes > 0 ? 100.0 * static_cast<double>(s.bytes) / cfg.max_bytes : 0.0;
  out << "format: v" << kEntryFormatVersion << "\n";
  out << "entries: " << s.entries << "\n";
  out << "bytes: " << s.bytes << " of " << cfg.max_bytes << " (" << std::fixed
      << std::setprecision(1) << pct << "%)\n";
  out << "temp files: " << s.temp_files << "\n";
  return 0;
}

int cmd_verify(const DiskCacheConfig& cfg, std::ostream& out, std::ostream& err) {
  if (report_missing(cfg, out)) return 0;
  CacheMode mode = cfg.mode == CacheMode::readonly ? CacheMode::readonly : CacheMode::on;
  DiskCache cache(with_mode(cfg, mode));
  if (!cache.enabled()) {
    err << "kiln cache verify: cache not usable (" << cache.disabled_reason() << ")\n";
    return 1;
  }
  VerifyResult r = cache.verify();
  for (const auto& [hex, why] : r.bad) {
    out << "bad " << hex << ": " << why << (cache.writable() ? " (removed)" : "") << "\n";
  }
  out << "checked " << r.checked << " entries: " << r.ok << " ok, " << r.bad.size() << " bad\n";
  return r.bad.empty() ? 0 : 1;
}

int cmd_clear(const DiskCacheConfig& cfg, std::ostream& out, std::ostream& err) {
  if (cfg.mode == CacheMode::readonly) {
    err << "kiln cache clear: KILN_CACHE=readonly\n";
    return 1;
  }
  if (report_missing(cfg, out)) return 0;
  DiskCache cache(with_mode(cfg, CacheMode::on));
  if (!cache.enabled()) {
    err << "kiln cache clear: cache not usable (" << cache.disabled_reason() << ")\n";
    return 1;
  }
  out << "removed " << cache.clear() << " files from " << cache.dir() << "\n";
  return 0;
}

int cmd_explain(const DiskCacheConfig& cfg, const std::string& a, const std::string& b,
                std::ostream& out, std::ostream& err) {
  DiskCache cache(with_mode(cfg, CacheMode::readonly));
  std::vector<std::pair<std::string, std::string>> fields[2];
  const std::string* names[2] = {&a, &b};
  for (int i = 0; i < 2; ++i) {
    std::string error;
    std::optional<std::string> m = cache.read_manifest(*names[i], &error);
    if (!m) {
      err << "kiln cache explain: " << error << "\n";
      return 1;
    }
    if (!parse_manifest(*m, fields[i])) {
      err << "kiln cache explain: entry " << *names[i] << " has a malformed manifest\n";
      return 1;
    }
  }
  // Fields are compared by name, in the order the first entry lists them (then the second's).
  std::map<std::string, std::string> second(fields[1].begin(), fields[1].end());
  std::map<std::string, std::string> first(fields[0].begin(), fields[0].end());
  int differences = 0;
  for (const auto& [name, value] : fields[0]) {
    auto it = second.find(name);
    if (it == second.end()) {
      out << name << ": " << value << "  |  (absent)\n";
      ++differences;
    } else if (it->second != value) {
      out << name << ": " << value << "  |  " << it->second << "\n";
      ++differences;
    }
  }
  for (const auto& [name, value] : fields[1]) {
    if (!first.count(name)) {
      out << name << ": (absent)  |  " << value << "\n";
      ++differences;
    }
  }
  if (differences == 0) out << "the manifests are identical\n";
  return 0;
}

}  // namespace

int run_cache_cli(const std::vector<std::string>& args, const DiskCacheConfig& cfg,
                  std::ostream& out, std::ostream& err) {
  if (args.empty()) {
    err << kUsage;
    return 2;
  }
  const std::string& cmd = args[0];
  if (cmd == "explain") {
    if (args.size() != 3) {
      err << kUsage;
      return 2;
    }
    return cmd_explain(cfg, args[1], args[2], out, err);
  }
  if (args.size() != 1) {
    err << kUsage;
    return 2;
  }
  if (cmd == "ls") return cmd_ls(cfg, out, err);
  if (cmd == "stats") return cmd_stats(cfg, out, err);
  if (cmd == "verify") return cmd_verify(cfg, out, err);
  if (cmd == "clear") return cmd_clear(cfg, out, err);
  if (cmd == "help" || cmd == "--help" || cmd == "-h") {
    out << kUsage;
    return 0;
  }
  err << "kiln cache: unknown command '" << cmd << "'\n" << kUsage;
  return 2;
}

}  // namespace kiln::cache
