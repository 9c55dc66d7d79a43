#include "codegen/llvm/jit_engine.h"

#include "jit/device.h"

#include <kiln/errors.h>
#include <kiln/options.h>

#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/ExecutorProcessControl.h>
#include <llvm/ExecutionEngine/Orc/ObjectLinkingLayer.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Host.h>

#include <atomic>
#include <mutex>

namespace kiln::llvmjit {

namespace {

// The target kiln compiles for: host features (not the host CPU name, which can mislead on VMs),
// capped by KILN_ISA. Cheap; needed for cache keys even when nothing is compiled.
struct Target {
  std::string cpu;
  std::string features;
};

// The linker: kiln only adds relocatable objects and looks symbols up, so a bare execution session
// with a JITLink object layer does (LLJIT's compile layers cost ~1 ms to set up, on every start).
struct Engine {
  std::unique_ptr<llvm::orc::ExecutionSession> es;
  std::unique_ptr<llvm::orc::ObjectLinkingLayer> linker;
  std::mutex mu;  // serializes JITDylib creation/removal
  std::atomic<uint64_t> counter{0};
};

bool feature_allowed(const std::string& f) {
  // f is like "avx512f"; drop what KILN_ISA caps away.
  const CpuInfo& ci = cpu_info();
  bool avx512 = ci.has(CpuFeature::avx512f);
  bool amx = ci.has(CpuFeature::amx_tile);
  if (!avx512 && (f.rfind("avx512", 0) == 0 || f == "evex512" || f.rfind("avx10", 0) == 0))
    return false;
  if (!amx && f.rfind("amx", 0) == 0) return false;
  return true;
}

void init_native_target() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });
}

const Target& target() {
  static const Target t = [] {
    init_native_target();
    Target r;
    llvm::StringMap<bool> host = llvm::sys::getHostCPUFeatures();
    std::vector<std::string> fs;
    for (auto& kv : host) {
      std::string f = kv.getKey().str();
      bool on = kv.getValue() && feature_allowed(f);
      fs.push_back((on ? "+" : "-") + f);
    }
    std::sort(fs.begin(), fs.end());
    for (auto& f : fs) r.features += (r.features.empty() ? "" : ",") + f;
    // A generic CPU model with explicit features: scheduling for a modern x86 core.
    r.cpu = cpu_info().has(CpuFeature::avx512f) ? "x86-64-v4" : "x86-64-v3";
    return r;
  }();
  return t;
}

Engine& engine() {
  static Engine* e = [] {
    init_native_target();
    auto epc = llvm::orc::SelfExecutorProcessControl::Create();
    if (!epc) throw CompileError("LLVM ORC could not start: " + llvm::toString(epc.takeError()));
    auto* eng = new Engine();
    eng->es = std::make_unique<llvm::orc::ExecutionSession>(std::move(*epc));
    eng->linker = std::make_unique<llvm::orc::ObjectLinkingLayer>(*eng->es);
    return eng;
  }();
  return *e;
}

class JITDylibObject : public LoadedObject {
 public:
  JITDylibObject(llvm::orc::JITDylib* jd) : jd_(jd) {}
  ~JITDylibObject() override {
    Engine& e = engine();
    std::lock_guard<std::mutex> lock(e.mu);
    llvm::consumeError(e.es->removeJITDylib(*jd_));
  }
  void* lookup(const std::string& symbol) override {
    Engine& e = engine();
    auto sym = e.es->lookup({jd_}, e.es->intern(symbol));
    if (!sym)
      throw CompileError("JIT lookup of " + symbol + " failed: " + llvm::toString(sym.takeError()));
    return sym->getAddress().toPtr<void*>();
  }

 private:
  llvm::orc::JITDylib* jd_;
};

}  // namespace

std::string target_cpu() { return target().cpu; }
std::string target_features() { return target().features; }
std::string llvm_version() { return LLVM_VERSION_STRING; }

std::unique_ptr<llvm::TargetMachine> make_target_machine() {
  const Target& e = target();
  std::string triple = llvm::sys::getProcessTriple();
  std::string err;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(triple, err);
  if (!target) throw CompileError("LLVM has no target for " + triple + ": " + err);
  llvm::TargetOptions opts;
  // Small code model: JITLink keeps a kernel's sections in one allocation, so constants are
  // addressed PC-relative instead of through the GOT (the large model reloads them in loops).
  auto* tm =
      target->createTargetMachine(triple, e.cpu, e.features, opts, llvm::Reloc::PIC_,
                                  llvm::CodeModel::Small, llvm::CodeGenOptLevel::Aggressive, true);
  if (!tm) throw CompileError("LLVM could not create a target machine for " + triple);
  return std::unique_ptr<llvm::TargetMachine>(tm);
}

void optimize(llvm::Module& m, llvm::TargetMachine& tm) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions pto;
  pto.LoopVectorization = true;
  pto.SLPVectorization = true;
  pto.LoopUnrolling = true;
  llvm::PassBuilder pb(&tm, pto);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cam, mam);
  llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
  mpm.run(m, mam);
}

std::vector<uint8_t> emit_object(llvm::Module& m, llvm::TargetMachine& tm, std::string* asm_text) {
  m.setDataLayout(tm.createDataLayout());
  m.setTargetTriple(tm.getTargetTriple().str());
  if (asm_text) {
    llvm::raw_string_ostream os(*asm_text);
    llvm::buffer_ostream bos(os);
    llvm::legacy::PassManager pm;
    if (tm.addPassesToEmitFile(pm, bos, nullptr, llvm::CodeGenFileType::AssemblyFile))
      throw CompileError("LLVM cannot emit assembly for this target");
    pm.run(m);
  }
  llvm::SmallVector<char, 0> buf;
  llvm::raw_svector_ostream os(buf);
  llvm::legacy::PassManager pm;
  if (tm.addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::ObjectFile))
    throw CompileError("LLVM cannot emit objects for this target");
  pm.run(m);
  return std::vector<uint8_t>(buf.begin(), buf.end());
}

std::unique_ptr<LoadedObject> load_object(const std::vector<uint8_t>& object,
                                          const std::string& name) {
  Engine& e = engine();
  llvm::orc::JITDylib* jd;
  {
    std::lock_guard<std::mutex> lock(e.mu);
    std::string jd_name = name + "." + std::to_string(e.counter.fetch_add(1));
    auto jdx = e.es->createJITDylib(jd_name);
    if (!jdx)
      throw CompileError("JIT: cannot create a JITDylib: " + llvm::toString(jdx.takeError()));
    jd = &*jdx;
    // libm and libc symbols (exp, memset, ...) come from the process.
    auto gen =
        llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess('\0');  // ELF: no prefix
    if (!gen) throw CompileError("JIT: " + llvm::toString(gen.takeError()));
    jd->addGenerator(std::move(*gen));
  }
  auto result = std::make_unique<JITDylibObject>(jd);
  auto buffer = llvm::MemoryBuffer::getMemBufferCopy(
      llvm::StringRef(reinterpret_cast<const char*>(object.data()), object.size()), name);
  if (auto err = e.linker->add(*jd, std::move(buffer)))
    throw CompileError("JIT: cannot link the kernel object: " + llvm::toString(std::move(err)));
  return result;
}

}  // namespace kiln::llvmjit
