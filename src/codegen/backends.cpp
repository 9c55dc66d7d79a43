// The registry of backends compiled into this build, in order of preference.
#include "codegen/backend.h"

#include <kiln/errors.h>

namespace kiln {

#ifdef KILN_WITH_LLVM
Backend* llvm_backend();
#endif
#ifdef KILN_WITH_ASMJIT
Backend* x86_backend();
#endif

const std::vector<Backend*>& backends() {
  static const std::vector<Backend*> list = [] {
    std::vector<Backend*> l;
#ifdef KILN_WITH_ASMJIT
    l.push_back(x86_backend());
#endif
#ifdef KILN_WITH_LLVM
    l.push_back(llvm_backend());
#endif
    return l;
  }();
  return list;
}

}  // namespace kiln
