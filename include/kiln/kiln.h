// kiln: a JIT compiler for tensor programs whose shapes change at run time.
// This is the one header users include; see API.md for the public names.
#pragma once

#include <kiln/array.h>
#include <kiln/dtype.h>
#include <kiln/errors.h>
#include <kiln/function.h>
#include <kiln/options.h>
#include <kiln/tensor.h>

namespace kiln {

// Everything kiln detects about this machine, as readable lines (what `kiln doctor` prints).
std::string doctor_report();
void set_num_threads(int n);
std::string cache_dir();
void clear_cache();

}  // namespace kiln
