// CallerLoc: records the C++ caller's source location ("file:line") on the nodes an API function
// creates, unless a front end (Python) already set the location for this thread.
#pragma once

#include "ir/node.h"

#include <kiln/tensor.h>

#include <optional>
#include <string>

namespace kiln::ir {

class CallerLoc {
 public:
  explicit CallerLoc(const Loc& loc) {
    if (!current_loc().empty()) return;
    std::string file = loc.file_name();
    size_t slash = file.find_last_of('/');
    if (slash != std::string::npos) file = file.substr(slash + 1);
    scope_.emplace(file + ":" + std::to_string(loc.line()));
  }

 private:
  std::optional<LocScope> scope_;
};

}  // namespace kiln::ir
