// The one interface every code generator is reached through. A backend says whether it takes a
// fused group, compiles it to a CompiledKernel (also returning the bytes the disk cache stores),
// and loads a kernel back from those bytes.
#pragma once

#include "codegen/kernel.h"
#include "ir/passes/fusion.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln {

struct LeafLayout {
  bool runtime_strides = false;  // strides come from the kernel's strides argument
  int stride_offset = 0;         // where this leaf's strides start in that array
  // The dtype the buffer holds: the leaf's own, except float16/bfloat16 temps between kernels,
  // which are kept in float32 (values are rounded only by casts and at the outputs).
  DType storage = DType::f32;
};

struct KernelRequest {
  const ir::FusionGroup* group = nullptr;
  std::vector<LeafLayout> layouts;  // one per group leaf
  DType out_storage = DType::f32;   // the dtype the output buffer holds
  std::string name;                 // readable kernel name
  bool keep_text = false;           // keep IR and assembly (inspect, KILN_DUMP)
  ir::SymbolFacts facts;            // what the kernel may assume of the symbols' extents
};

// What a backend's cached bytes are (the disk cache's payload kinds).
enum class ArtifactKind : uint8_t { llvm_object = 1, x86_blob = 2, cubin = 3 };

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual ArtifactKind artifact_kind() const = 0;
  // Everything about this backend that changes generated code (versions, target, features).
  virtual std::string fingerprint() const = 0;
  // Why a backend declined a group that is its kind of work (a fast path not taken).
  struct Decline {
    std::string why;                     // non-empty: counted as a fallback
    bool take_bare_contraction = false;  // it would take the contraction without its epilogue
  };
  // Whether this backend takes the group; when not, `decline` may say why.
  virtual bool can_compile(const ir::FusionGroup& g, const std::vector<LeafLayout>& layouts,
                           Decline* decline) const = 0;
  // Compiles; `artifact` receives the relocatable bytes to cache (may be left empty).
  virtual std::shared_ptr<CompiledKernel> compile(const KernelRequest& req,
                                                  std::vector<uint8_t>* artifact) = 0;
  // Loads a kernel from cached bytes; throws CompileError if they cannot be loaded.
  virtual std::shared_ptr<CompiledKernel> load(const KernelRequest& req,
                                               const std::vector<uint8_t>& artifact) = 0;
};

// Backends in order of preference; the first that can compile a group gets it.
const std::vector<Backend*>& backends();

// A canonical, readable description of a fused group and its leaf layouts: what the cache key
// hashes (independent of the rest of the graph).
std::string describe_group(const ir::FusionGroup& g, const std::vector<LeafLayout>& layouts,
                           DType out_storage);
// The dtype a kernel stores `n` in when it is a temp between kernels (not a graph output).
DType temp_storage_dtype(DType t);

}  // namespace kiln
