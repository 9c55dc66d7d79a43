// Debian's libasmjit-dev ships only a static archive built without -fPIC. Of its members, only
// globals.cpp.o cannot go into the shared libkiln: it references glibc's `stderr` with a PC32
// relocation. It defines exactly the three functions below; defining them here keeps the linker
// from pulling that member in. Behaviour matches asmjit's release build except that
// errorAsString gives the error number instead of its name.
#include <asmjit/core.h>

#include <cstdio>
#include <cstdlib>

ASMJIT_BEGIN_NAMESPACE

namespace DebugUtils {

const char* errorAsString(Error err) noexcept {
  static thread_local char buf[48];
  std::snprintf(buf, sizeof(buf), "asmjit error %u", unsigned(err));
  return buf;
}

void debugOutput(const char* str) noexcept { std::fputs(str, stderr); }

void assertionFailed(const char* file, int line, const char* msg) noexcept {
  std::fprintf(stderr, "[asmjit] assertion failed at %s:%d: %s\n", file, line, msg);
  std::abort();
}

}  // namespace DebugUtils

ASMJIT_END_NAMESPACE
