// How a fused group's work is split across threads: the parallel extent (the units a kernel's
// [begin, end) range counts) and a grain that keeps each chunk worth a thread's wake-up.
// Shared by every backend and by the Executable. With symbolic dims both depend on the call, so
// a group's schedule is kept as a ScheduleSpec (products of dims) and evaluated per call.
#pragma once

#include "ir/passes/fusion.h"

#include <cstdint>
#include <exception>
#include <optional>
#include <string>

namespace kiln {

struct Schedule {
  int64_t extent = 0;  // units: elements (elementwise), rows (row_reduce), output rows (matmul),
                       // output planes (conv2d)
  int64_t grain = 1;   // minimum units per chunk
};

struct ScheduleSpec {
  ir::Shape extent;     // the parallel extent is the product of these dims
  ir::Shape unit_work;  // the work of one unit is the product of these dims (each at least 1)
  int64_t divisor = 1;  // the grain is (kWorkPerChunk / divisor) / unit work
  // A row_reduce over leading axes (its last axis kept) computes outputs that follow each other
  // along that axis together: a chunk holds at least min(kColumnGrain, this dim / 4) units.
  std::optional<ir::Dim> columns;
  ir::Shape root;         // an empty root means no work at all
  bool symbolic = false;  // whether any of these dims is symbolic (else `eval` is a constant)

  Schedule eval(const int64_t* dims) const;
};

ScheduleSpec schedule_spec_for(const ir::FusionGroup& g);
// For groups whose dims are all concrete.
Schedule schedule_for(const ir::FusionGroup& g);

// Thrown by code generation when a reduction in a row kernel is read at other rows than the ones
// the kernel is computing; the caller materializes that node and fuses again.
struct FusionRejected : std::exception {
  explicit FusionRejected(const ir::Node* n) : node(n) {}
  const ir::Node* node;
  const char* what() const noexcept override { return "reduction not aligned with its row kernel"; }
};

}  // namespace kiln
