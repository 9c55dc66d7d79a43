// The shape policy of one Function (API.md's `dynamic`): for a call that no compiled variant
// serves, which of its dims become symbols in the variant compiled for it.
//   automatic: exact at first; a dim seen with a second value becomes symbolic from then on.
//   exact: never symbolic.  symbolic: every dim.  per_arg: the dims listed per argument.
// A symbolic dim whose extent is 0 or 1 stays exact in that variant (its own variant). A dim
// whose symbolic trace failed (an op that cannot take a symbolic extent) is pinned exact.
// The dims automatic mode settled on can be saved and restored across processes.
#pragma once

#include "jit/variant_guard.h"

#include <kiln/options.h>

#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace kiln {

class ShapePolicy {
 public:
  explicit ShapePolicy(const Options& options) : options_(options) {}

  struct Decision {
    VariantGuard guard;
    std::vector<std::string> reasons;  // dims that became symbolic with this call, and why
    bool settled_changed = false;      // the set of symbolic dims grew (worth saving)
  };
  // Records the call's extents and returns the guard to compile for it. most_general: make every
  // dim of at least 2 symbolic, without divisibility facts (the variant bound was reached).
  Decision decide(std::span<const Array> args, bool most_general);
  // The program cannot take the symbols of `guard` for which rejected[sym] is true: their dims
  // stay exact from now on. Returns one reason per pinned dim.
  std::vector<std::string> pin(const VariantGuard& guard, const std::vector<bool>& rejected,
                               std::span<const Array> args, const std::string& why);

  // The dims automatic mode made symbolic, as text ("arg dim multiple" lines), and back.
  std::string settled() const;
  void restore(const std::string& text, std::span<const Array> args);

 private:
  struct DimState {
    int64_t first = -1;        // the first extent seen
    bool symbolic = false;     // automatic mode: seen with a second extent
    bool pinned = false;       // symbolic trace failed: always exact
    bool all_multiple = true;  // every extent seen was a multiple of kSymbolMultiple
  };
  bool wants_symbol(size_t arg, size_t dim, const DimState& st) const;
  std::vector<DimState>& states_for(size_t arg, size_t rank);

  Options options_;
  mutable std::mutex mu_;
  std::vector<std::vector<DimState>> dims_;  // per argument, per dim
};

}  // namespace kiln
