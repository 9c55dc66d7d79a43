// Connects `kiln cache ...` and `kiln inspect <entry>` to the disk cache module.
#include "tools/commands.h"

#include <cstdio>

namespace kiln::tools {

int run_cache(const std::vector<std::string>& args) {
  std::fprintf(stderr, "kiln cache: the disk cache is not part of this build yet\n");
  return 1;
}

int run_inspect_cache_entry(const std::string& path) {
  std::fprintf(stderr, "kiln inspect: %s is not a directory, and cache entries are not readable in this build yet\n", path.c_str());
  return 1;
}

}  // namespace kiln::tools
