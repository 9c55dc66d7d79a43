// Connects `kiln cache ...` and `kiln inspect <entry file>` to the disk cache module.
#include "cache/entry_format.h"
#include "tools/cache_command.h"
#include "tools/commands.h"

#include <cstdio>
#include <fstream>
#include <iterator>

namespace kiln::tools {

int run_cache(const std::vector<std::string>& args) { return run_cache_command(args); }

int run_inspect_cache_entry(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    std::fprintf(stderr,
                 "kiln inspect: cannot open %s (expected a cache entry or a dump directory)\n",
                 path.c_str());
    return 1;
  }
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  cache::EntryView view;
  cache::ParseStatus st = cache::parse_entry(bytes, view);
  if (st != cache::ParseStatus::ok) {
    std::fprintf(stderr, "kiln inspect: %s is not a valid cache entry: %s\n", path.c_str(),
                 cache::parse_status_name(st));
    return 1;
  }
  std::printf("entry: %s\npayload: %s, %zu bytes\nmanifest:\n%.*s", path.c_str(),
              cache::payload_kind_name(view.kind), view.payload.size(),
              static_cast<int>(view.manifest.size()), view.manifest.data());
  return 0;
}

}  // namespace kiln::tools
