// KILN_DUMP: per compiled kernel, a folder named by its cache key holding the fused group, the
// LLVM IR, the assembly, and a manifest linking it to its key and the source lines it came from.
#pragma once

#include "codegen/kernel.h"
#include "ir/passes/fusion.h"

#include <string>

namespace kiln {

// Never throws: a dump that cannot be written is a warning.
void write_kernel_dump(const std::string& dir, const CompiledKernel& k, const ir::FusionGroup& g);

}  // namespace kiln
