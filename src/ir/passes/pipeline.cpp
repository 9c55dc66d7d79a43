// The graph pass pipeline, in order. Each pass is named, timed and logged under KILN_LOG=debug;
// debug builds verify the graph after every pass, so the pass that breaks an invariant is named.
#include "ir/passes/passes.h"

#include "support/log.h"

#include <chrono>

namespace kiln::ir {

namespace {

using Pass = Graph (*)(const Graph&);

struct NamedPass {
  const char* name;
  Pass run;
};

constexpr NamedPass kPasses[] = {
    {"vector_matmul", vector_matmul},
    {"split_reductions", split_reductions},
    {"simplify", simplify},
    {"constant_fold", constant_fold},
    {"cse", cse},
    {"dce", dce},
};

// Rounds of the whole list; after the first round's vector_matmul (which adds a few nodes once),
// each round only removes or merges nodes, so few are ever needed.
constexpr int kMaxRounds = 4;

Graph run_pass(const NamedPass& pass, const Graph& g, int round) {
  const auto start = std::chrono::steady_clock::now();
  Graph out = pass.run(g);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  KILN_LOG_AT(debug) << "pass " << pass.name << " (round " << round
                     << "): " << g.topo_order().size() << " -> " << out.topo_order().size()
                     << " nodes, " << ms << " ms";
#ifndef NDEBUG
  verify(out);
#endif
  return out;
}

}  // namespace

Graph run_pipeline(const Graph& g) {
#ifndef NDEBUG
  verify(g);  // so that a bad traced graph is not blamed on the first pass
#endif
  Graph cur = g;
  for (int round = 0; round < kMaxRounds; ++round) {
    const uint64_t before = cur.structural_hash();
    for (const NamedPass& pass : kPasses) cur = run_pass(pass, cur, round);
    if (cur.structural_hash() == before) break;
  }
  verify(cur);
  return cur;
}

}  // namespace kiln::ir
