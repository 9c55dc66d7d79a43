// KILN_DUMP: per compiled kernel, a folder named by its cache key holding the program after
// passes, the fused group, the LLVM IR (or asmjit listing), the assembly, and a manifest linking
// it to its key and the source lines it came from. Written on cache hits too.
#pragma once

#include "codegen/kernel.h"
#include "ir/passes/fusion.h"

#include <string>

namespace kiln {

// Never throws: a dump that cannot be written is a warning.
// `graph_text` is the whole program after passes (the kernel's context).
void write_kernel_dump(const std::string& dir, const CompiledKernel& k, const ir::FusionGroup& g,
                       const std::string& graph_text);

}  // namespace kiln
