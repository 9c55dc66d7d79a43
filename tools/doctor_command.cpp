#include "tools/commands.h"

#include <kiln/kiln.h>

#include <cstdio>

namespace kiln::tools {

int run_doctor(const std::vector<std::string>& args) {
  if (!args.empty()) {
    std::fprintf(stderr, "kiln doctor: takes no arguments\n");
    return 2;
  }
  std::fputs(doctor_report().c_str(), stdout);
  return 0;
}

}  // namespace kiln::tools
