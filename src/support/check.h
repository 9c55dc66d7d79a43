// KILN_CHECK(cond) << "message": internal invariants. A failure throws kiln::Error with the file,
// line, condition and message (never aborts the process: a serving loop must survive a kiln bug).
#pragma once

#include <kiln/errors.h>

#include <sstream>
#include <string>

namespace kiln::detail {

class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* cond) {
    stream_ << "kiln internal error at " << file << ":" << line << ": check `" << cond
            << "` failed";
  }
  template <typename T>
  CheckFailure& operator<<(const T& v) {
    if (!has_message_) {
      stream_ << ": ";
      has_message_ = true;
    }
    stream_ << v;
    return *this;
  }
  [[noreturn]] ~CheckFailure() noexcept(false) { throw Error(stream_.str()); }

 private:
  std::ostringstream stream_;
  bool has_message_ = false;
};

// Lets the macros below be one expression (no dangling else): `&` binds looser than `<<`.
struct Voidify {
  template <typename T>
  void operator&(T&&) {}
};

}  // namespace kiln::detail

#define KILN_CHECK(cond) \
  (cond) ? (void)0       \
         : ::kiln::detail::Voidify() & ::kiln::detail::CheckFailure(__FILE__, __LINE__, #cond)
