#include "codegen/schedule.h"

#include <algorithm>

namespace kiln {

namespace {
// About 64K elementary operations per chunk: enough to amortize waking a thread.
constexpr int64_t kWorkPerChunk = int64_t{1} << 16;
}  // namespace

Schedule schedule_for(const ir::FusionGroup& g) {
  Schedule s;
  const auto& root = g.root->shape;
  switch (g.kind) {
    case ir::GroupKind::elementwise:
      s.extent = ir::numel(root);
      s.grain = kWorkPerChunk / 4;
      break;
    case ir::GroupKind::row_reduce: {
      int64_t outer = 1, inner = 1;
      for (int64_t i = 0; i < static_cast<int64_t>(g.domain.size()); ++i) {
        bool red = std::binary_search(g.reduce_axes.begin(), g.reduce_axes.end(), i);
        (red ? inner : outer) *= g.domain[i].value;
      }
      s.extent = inner == 0 && !g.root_is_outer ? 0 : outer;
      s.grain = std::max<int64_t>(1, kWorkPerChunk / std::max<int64_t>(1, inner));
      break;
    }
    case ir::GroupKind::matmul: {
      int64_t n = root.back().value;
      int64_t m = root[root.size() - 2].value;
      int64_t batch = ir::numel(root) / std::max<int64_t>(1, m * n);
      if (m * n == 0) batch = 0;
      int64_t k = g.contraction->inputs[0]->shape.back().value;
      s.extent = batch * m;
      s.grain =
          std::max<int64_t>(1, kWorkPerChunk / std::max<int64_t>(1, n * std::max<int64_t>(k, 1)));
      break;
    }
    case ir::GroupKind::conv2d: {
      s.extent = root[0].value * root[1].value;
      const auto& w = g.contraction->inputs[1]->shape;
      int64_t per = root[2].value * root[3].value * w[1].value * w[2].value * w[3].value;
      s.grain = std::max<int64_t>(1, kWorkPerChunk / std::max<int64_t>(1, per));
      break;
    }
  }
  if (ir::numel(root) == 0) s.extent = 0;
  return s;
}

}  // namespace kiln
