// Dead code elimination. A Graph is its inputs and outputs; nodes hold only their own inputs, so
// the graph is exactly what the outputs reach (plus the inputs, always kept and in order: they are
// the calling convention). A node another pass replaced is already unreachable from the new outputs
// and is freed with its last user, so this pass copies the inputs and outputs and rebuilds nothing:
// it names the step in the pipeline and is the one place to prune if Graph ever grows a node list.
#include "ir/passes/passes.h"

namespace kiln::ir {

Graph dce(const Graph& g) {
  Graph out;
  out.inputs = g.inputs;
  out.outputs = g.outputs;
  return out;
}

}  // namespace kiln::ir
