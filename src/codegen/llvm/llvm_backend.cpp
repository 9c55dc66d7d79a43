// The LLVM backend: the general path for every fused group and dtype. A group is lowered to a
// loop nest (lower_group.cpp), optimized at O3 for the host, emitted as an ELF object (the bytes
// the disk cache keeps) and linked into its own JITDylib.
#include "codegen/llvm/jit_engine.h"
#include "codegen/llvm/lower_group.h"
#include "codegen/backend.h"

#include <kiln/errors.h>

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include <chrono>

namespace kiln {

namespace {

class LlvmKernel : public CompiledKernel {
 public:
  std::unique_ptr<llvmjit::LoadedObject> object;
};

std::shared_ptr<CompiledKernel> link(const KernelRequest& req, const std::vector<uint8_t>& obj) {
  auto k = std::make_shared<LlvmKernel>();
  k->object = llvmjit::load_object(obj, req.name);
  k->fn = reinterpret_cast<KernelFn>(k->object->lookup(llvmjit::kKernelSymbol));
  k->name = req.name;
  k->backend = "llvm";
  k->code_bytes = obj.size();
  for (const auto& n : req.group->nodes) k->ops.emplace_back(ir::op_name(n->op));
  return k;
}

class LlvmBackend : public Backend {
 public:
  std::string name() const override { return "llvm"; }
  ArtifactKind artifact_kind() const override { return ArtifactKind::llvm_object; }

  std::string fingerprint() const override {
    return "llvm " + llvmjit::llvm_version() + " cpu=" + llvmjit::target_cpu() +
           " features=" + llvmjit::target_features();
  }

  bool can_compile(const ir::FusionGroup&, const std::vector<LeafLayout>&,
                   Decline*) const override {
    return true;
  }

  std::shared_ptr<CompiledKernel> compile(const KernelRequest& req,
                                          std::vector<uint8_t>* artifact) override {
    auto t0 = std::chrono::steady_clock::now();
    llvm::LLVMContext ctx;
    std::unique_ptr<llvm::Module> m =
        llvmjit::lower_group(ctx, *req.group, req.layouts, req.out_storage, req.facts);
    auto tm = llvmjit::make_target_machine();
    m->setDataLayout(tm->createDataLayout());
    m->setTargetTriple(tm->getTargetTriple().str());
    llvmjit::optimize(*m, *tm);
    std::string ir_text, asm_text;
    if (req.keep_text) {
      llvm::raw_string_ostream os(ir_text);
      m->print(os, nullptr);
    }
    std::vector<uint8_t> obj = llvmjit::emit_object(*m, *tm, req.keep_text ? &asm_text : nullptr);
    auto k = link(req, obj);
    k->source = std::move(ir_text);
    k->asm_text = std::move(asm_text);
    k->compile_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (artifact) *artifact = std::move(obj);
    return k;
  }

  std::shared_ptr<CompiledKernel> load(const KernelRequest& req,
                                       const std::vector<uint8_t>& artifact) override {
    return link(req, artifact);
  }
};

}  // namespace

Backend* llvm_backend() {
  static LlvmBackend b;
  return &b;
}

}  // namespace kiln
