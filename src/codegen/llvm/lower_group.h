// Lowers one fused group to an LLVM function with the KernelFn ABI (codegen/kernel.h): a loop nest
// over the group's schedule, every in-group node computed in registers, leaves read through
// their strides (compile-time constants for contiguous leaves, runtime values otherwise).
// Symbolic extents are read from the kernel's dims argument; `facts` says what they satisfy.
#pragma once

#include "codegen/backend.h"
#include "ir/passes/fusion.h"

#include <memory>
#include <string>
#include <vector>

namespace llvm {
class LLVMContext;
class Module;
}  // namespace llvm

namespace kiln::llvmjit {

inline constexpr const char* kKernelSymbol = "kiln_kernel";

// Throws FusionRejected (codegen/schedule.h) when a reduction cannot be read per row.
std::unique_ptr<llvm::Module> lower_group(llvm::LLVMContext& ctx, const ir::FusionGroup& g,
                                          const std::vector<LeafLayout>& layouts, DType out_storage,
                                          const ir::SymbolFacts& facts);

}  // namespace kiln::llvmjit
