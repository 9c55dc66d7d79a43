// The `kiln` command line: doctor (what kiln detects), cache (the on-disk kernel cache), inspect.
#include "tools/commands.h"

#include <cstdio>
#include <string>
#include <vector>

namespace {

void usage() {
  std::fprintf(stderr,
               "usage: kiln doctor\n"
               "       kiln cache ls|stats|verify|clear|explain KEY1 KEY2\n"
               "       kiln inspect <cache entry | dump dir>\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "-h" || args[0] == "--help") {
    usage();
    return args.empty() ? 2 : 0;
  }
  std::string cmd = args[0];
  args.erase(args.begin());
  try {
    if (cmd == "doctor") return kiln::tools::run_doctor(args);
    if (cmd == "inspect") return kiln::tools::run_inspect(args);
    if (cmd == "cache") return kiln::tools::run_cache(args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln %s: %s\n", cmd.c_str(), e.what());
    return 1;
  }
  std::fprintf(stderr, "kiln: unknown command '%s'\n", cmd.c_str());
  usage();
  return 2;
}
