// kiln inspect <dump dir>: lists the kernels a KILN_DUMP directory holds, with their manifests.
#include "tools/commands.h"

#include <cstdio>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace kiln::tools {

namespace fs = std::filesystem;

int run_inspect(const std::vector<std::string>& args) {
  if (args.size() != 1) {
    std::fprintf(stderr, "usage: kiln inspect <cache entry | dump dir>\n");
    return 2;
  }
  fs::path p(args[0]);
  std::error_code ec;
  if (fs::is_directory(p, ec)) {
    int kernels = 0;
    std::vector<fs::path> dirs;
    for (const auto& e : fs::directory_iterator(p, ec))
      if (e.is_directory() && fs::exists(e.path() / "manifest.txt")) dirs.push_back(e.path());
    std::sort(dirs.begin(), dirs.end());
    for (const auto& d : dirs) {
      std::ifstream in(d / "manifest.txt");
      std::stringstream ss;
      ss << in.rdbuf();
      std::printf("== %s\n%s", d.filename().c_str(), ss.str().c_str());
      for (const auto& f : fs::directory_iterator(d, ec))
        if (f.path().filename() != "manifest.txt")
          std::printf("   file: %s (%ju bytes)\n", f.path().filename().c_str(),
                      static_cast<uintmax_t>(f.file_size()));
      ++kernels;
    }
    if (kernels == 0) {
      std::fprintf(stderr, "kiln inspect: %s holds no kernel dumps (expected KILN_DUMP output)\n",
                   args[0].c_str());
      return 1;
    }
    return 0;
  }
  return run_inspect_cache_entry(args[0]);
}

}  // namespace kiln::tools
