// The process-wide LLVM ORC engine: target machine for the host (features capped by KILN_ISA),
// the O3 pipeline, object emission, and loading objects into a JITDylib of their own so a kernel
// can be freed alone and the same object can come from the disk cache.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace llvm {
class Module;
class TargetMachine;
}  // namespace llvm

namespace kiln::llvmjit {

// Code loaded into the JIT; unloading happens in the destructor.
class LoadedObject {
 public:
  virtual ~LoadedObject() = default;
  virtual void* lookup(const std::string& symbol) = 0;
};

// CPU name and feature string used for every kernel (part of cache keys).
std::string target_cpu();
std::string target_features();
std::string llvm_version();

// A fresh target machine for the host (not thread-safe: one per compilation).
std::unique_ptr<llvm::TargetMachine> make_target_machine();

// Runs the O3 pipeline on the module for the target.
void optimize(llvm::Module& m, llvm::TargetMachine& tm);
// Emits an ELF relocatable object, and optionally the assembly text.
std::vector<uint8_t> emit_object(llvm::Module& m, llvm::TargetMachine& tm, std::string* asm_text);

// Links an object into a new JITDylib; throws kiln::CompileError on failure.
std::unique_ptr<LoadedObject> load_object(const std::vector<uint8_t>& object,
                                          const std::string& name);

}  // namespace kiln::llvmjit
