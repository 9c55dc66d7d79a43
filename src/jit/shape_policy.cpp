#include "jit/shape_policy.h"

#include <kiln/errors.h>

#include <algorithm>
#include <map>
#include <sstream>

namespace kiln {

std::vector<ShapePolicy::DimState>& ShapePolicy::states_for(size_t arg, size_t rank) {
  if (dims_.size() <= arg) dims_.resize(arg + 1);
  // A new rank is a new program for this argument: its dims start over.
  if (dims_[arg].size() != rank) dims_[arg].assign(rank, DimState{});
  return dims_[arg];
}

bool ShapePolicy::wants_symbol(size_t arg, size_t dim, const DimState& st) const {
  if (st.pinned) return false;
  switch (options_.dynamic) {
    case DynamicMode::exact:
      return false;
    case DynamicMode::symbolic:
      return true;
    case DynamicMode::automatic:
      return st.symbolic;
    case DynamicMode::per_arg: {
      auto it = options_.dynamic_dims.find(static_cast<int>(arg));
      if (it == options_.dynamic_dims.end()) return false;
      const int rank = static_cast<int>(dims_[arg].size());
      for (int d : it->second)
        if ((d < 0 ? d + rank : d) == static_cast<int>(dim)) return true;
      return false;
    }
  }
  return false;
}

ShapePolicy::Decision ShapePolicy::decide(std::span<const Array> args, bool most_general) {
  std::lock_guard<std::mutex> lock(mu_);
  if (options_.dynamic == DynamicMode::per_arg) {
    for (const auto& [arg, dims] : options_.dynamic_dims) {
      if (arg < 0 || static_cast<size_t>(arg) >= args.size()) continue;
      const int rank = static_cast<int>(args[arg].shape().size());
      for (int d : dims)
        if (d >= rank || d < -rank)
          throw ShapeError("dynamic dims: input " + std::to_string(arg) + " has " +
                           std::to_string(rank) + " dims, so its dim " + std::to_string(d) +
                           " does not exist (dims count from 0, or from -1 at the end)");
    }
  }
  Decision out;
  VariantGuard& g = out.guard;
  g.args.resize(args.size());
  std::map<int64_t, int32_t> symbol_of_extent;  // equal extents share a symbol (a relation)
  std::vector<bool> multiple;
  for (size_t i = 0; i < args.size(); ++i) {
    const Array& a = args[i];
    ArgGuard& ag = g.args[i];
    ag.dtype = a.dtype();
    ag.contiguous = a.is_contiguous();
    auto& states = states_for(i, a.shape().size());
    for (size_t d = 0; d < a.shape().size(); ++d) {
      const int64_t v = a.shape()[d];
      DimState& st = states[d];
      if (st.first < 0) {
        st.first = v;
      } else if (st.first != v && !st.symbolic) {
        st.symbolic = true;
        if (options_.dynamic == DynamicMode::automatic && !st.pinned) {
          out.reasons.push_back("arg " + std::to_string(i) + " dim " + std::to_string(d) + ": " +
                                std::to_string(st.first) + " -> " + std::to_string(v) +
                                ", now symbolic");
          out.settled_changed = true;
        }
      }
      st.all_multiple = st.all_multiple && v % ir::kSymbolMultiple == 0;
      const bool symbolic = v >= 2 && (most_general ? !st.pinned : wants_symbol(i, d, st));
      if (!symbolic) {
        ag.dims.push_back(ir::Dim::concrete(v));
        continue;
      }
      auto [it, fresh] = symbol_of_extent.emplace(v, static_cast<int32_t>(multiple.size()));
      if (fresh) multiple.push_back(!most_general && st.all_multiple);
      multiple[it->second] = multiple[it->second] && st.all_multiple;
      ag.dims.push_back(ir::Dim::symbol(it->second));
    }
  }
  for (bool m : multiple) g.facts.push_back(ir::SymbolFact{m});
  return out;
}

std::vector<std::string> ShapePolicy::pin(const VariantGuard& guard,
                                          const std::vector<bool>& rejected,
                                          std::span<const Array> args, const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> reasons;
  for (size_t i = 0; i < guard.args.size() && i < args.size(); ++i) {
    auto& states = states_for(i, args[i].shape().size());
    for (size_t d = 0; d < guard.args[i].dims.size() && d < states.size(); ++d) {
      const ir::Dim& dim = guard.args[i].dims[d];
      if (!dim.is_symbolic() || !rejected[dim.sym] || states[d].pinned) continue;
      states[d].pinned = true;
      reasons.push_back("arg " + std::to_string(i) + " dim " + std::to_string(d) +
                        ": kept exact, the program cannot take it symbolic (" + why + ")");
    }
  }
  return reasons;
}

std::string ShapePolicy::settled() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::ostringstream os;
  os << "kiln shape decisions 1\n";
  for (size_t i = 0; i < dims_.size(); ++i)
    for (size_t d = 0; d < dims_[i].size(); ++d) {
      const DimState& st = dims_[i][d];
      if (st.symbolic && !st.pinned)
        os << i << " " << d << " " << dims_[i].size() << " " << (st.all_multiple ? 1 : 0) << "\n";
    }
  return os.str();
}

void ShapePolicy::restore(const std::string& text, std::span<const Array> args) {
  std::lock_guard<std::mutex> lock(mu_);
  std::istringstream is(text);
  std::string header;
  std::getline(is, header);
  if (header != "kiln shape decisions 1") return;
  size_t arg, dim, rank;
  int multiple;
  while (is >> arg >> dim >> rank >> multiple) {
    // Saved by a process whose arguments had these ranks; anything else is not this program.
    if (arg >= args.size() || args[arg].shape().size() != rank || dim >= rank) continue;
    DimState& st = states_for(arg, rank)[dim];
    st.symbolic = true;
    st.all_multiple = multiple == 1;
  }
}

}  // namespace kiln
