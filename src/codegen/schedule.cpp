#include "codegen/schedule.h"

#include <algorithm>

namespace kiln {

namespace {
// About 64K elementary operations per chunk: enough to amortize waking a thread.
constexpr int64_t kWorkPerChunk = int64_t{1} << 16;
// Outputs along the kept last axis a column reduction's chunk holds at least (1 KiB of float32 per
// row it reads), where the row is four times as long.
constexpr int64_t kColumnGrain = 256;
}  // namespace

ScheduleSpec schedule_spec_for(const ir::FusionGroup& g) {
  ScheduleSpec s;
  const auto& root = g.root->shape;
  s.root = root;
  switch (g.kind) {
    case ir::GroupKind::elementwise:
      s.extent = root;
      s.divisor = 4;
      break;
    case ir::GroupKind::row_reduce:
      for (int64_t i = 0; i < static_cast<int64_t>(g.domain.size()); ++i) {
        bool red = std::binary_search(g.reduce_axes.begin(), g.reduce_axes.end(), i);
        (red ? s.unit_work : s.extent).push_back(g.domain[i]);
      }
      if (!g.domain.empty() && !std::binary_search(g.reduce_axes.begin(), g.reduce_axes.end(),
                                                   static_cast<int64_t>(g.domain.size()) - 1))
        s.columns = g.domain.back();
      break;
    case ir::GroupKind::matmul:
      // Units are output rows: every dim but the last; each costs N * K.
      s.extent.assign(root.begin(), root.end() - 1);
      s.unit_work = {root.back(), g.contraction->inputs[0]->shape.back()};
      break;
    case ir::GroupKind::conv2d: {
      const auto& w = g.contraction->inputs[1]->shape;
      s.extent = {root[0], root[1]};
      s.unit_work = {root[2], root[3], w[1], w[2], w[3]};
      break;
    }
  }
  s.symbolic =
      !ir::is_concrete(s.extent) || !ir::is_concrete(s.unit_work) || !ir::is_concrete(s.root);
  return s;
}

Schedule ScheduleSpec::eval(const int64_t* dims) const {
  Schedule s;
  s.extent = 1;
  for (const ir::Dim& d : extent) s.extent *= ir::dim_value(d, dims);
  int64_t unit = 1;
  for (const ir::Dim& d : unit_work) unit *= std::max<int64_t>(1, ir::dim_value(d, dims));
  s.grain = std::max<int64_t>(1, kWorkPerChunk / divisor / unit);
  if (columns) {
    // A quarter of a row at most, so that a few rows still make a chunk for each of four threads.
    const int64_t width = ir::dim_value(*columns, dims);
    s.grain = std::max(s.grain, std::min(kColumnGrain, (width + 3) / 4));
  }
  if (ir::numel(root, dims) == 0) s.extent = 0;
  return s;
}

Schedule schedule_for(const ir::FusionGroup& g) { return schedule_spec_for(g).eval(nullptr); }

}  // namespace kiln
