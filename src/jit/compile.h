// From a traced graph and a signature to an Executable: passes, fusion, per-kernel backend
// choice and cache lookup (memory, then disk), the buffer plan, and KILN_DUMP output.
#pragma once

#include "ir/node.h"
#include "jit/executable.h"
#include "jit/variant_guard.h"

#include <kiln/options.h>

#include <memory>
#include <string>
#include <vector>

namespace kiln {

struct CompileReport {
  int kernels = 0;
  int compiled = 0;
  int memory_hits = 0;
  int disk_hits = 0;
  std::vector<std::string> backends;   // per kernel
  std::vector<std::string> fallbacks;  // kernels that did not take their fast path, and why
};

struct CompileRequest {
  const ir::Graph* graph = nullptr;
  const VariantGuard* guard = nullptr;  // the variant: layouts per argument, symbols' facts
  const Options* options = nullptr;
  std::string function_name;
  bool keep_text = false;  // inspect(): keep IR and assembly of every kernel
};

std::shared_ptr<Executable> compile_executable(const CompileRequest& req, CompileReport& report);

// The fields of a kernel cache key, in order: "kiln" (version), "backend" (name, versions, target
// features), "device" (CPU feature bits and cache sizes), "options" (code-changing options),
// "group" (the fused group). For tests: replaces one field's value in every key built from now on
// (an empty value restores it), to check that each component really changes the key.
void override_key_field_for_testing(const std::string& field, const std::string& value);

}  // namespace kiln
