// Logging at the levels of KILN_LOG (error, warn, info, debug) to stderr, prefixed "kiln: ".
// KILN_LOG_AT(level) << ...; the message is built only when the level is enabled.
#pragma once

#include <kiln/options.h>

#include <sstream>
#include <string>

namespace kiln {

bool log_enabled(LogLevel level);
void log_line(LogLevel level, const std::string& line);

namespace detail {
class LogMessage {
 public:
  explicit LogMessage(LogLevel level) : level_(level) {}
  ~LogMessage() { log_line(level_, stream_.str()); }
  template <typename T>
  LogMessage& operator<<(const T& v) {
    stream_ << v;
    return *this;
  }

 private:
  LogLevel level_;
  std::ostringstream stream_;
};
}  // namespace detail

}  // namespace kiln

#include "support/check.h"

#define KILN_LOG_AT(level)                      \
  !::kiln::log_enabled(::kiln::LogLevel::level) \
      ? (void)0                                 \
      : ::kiln::detail::Voidify() & ::kiln::detail::LogMessage(::kiln::LogLevel::level)
