#include "support/log.h"

#include <cstdio>
#include <mutex>

namespace kiln {

namespace {
const char* level_name(LogLevel l) {
  switch (l) {
    case LogLevel::error:
      return "error";
    case LogLevel::warn:
      return "warning";
    case LogLevel::info:
      return "info";
    case LogLevel::debug:
      return "debug";
  }
  return "?";
}
}  // namespace

bool log_enabled(LogLevel level) {
  return static_cast<int>(level) <= static_cast<int>(global_options().log);
}

void log_line(LogLevel level, const std::string& line) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  std::fprintf(stderr, "kiln %s: %s\n", level_name(level), line.c_str());
}

}  // namespace kiln
