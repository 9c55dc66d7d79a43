// The identity of the kiln binary that is running: the GNU build-id note of the module that holds
// libkiln's code (or, without one, a hash of its executable segments). Generated code depends on
// kiln's own code as much as on its version number, so every disk-cache key carries this: a
// rebuilt kiln never loads kernels that an older build generated.
#pragma once

#include <string>

namespace kiln {

// Lowercase hex, computed once; "unknown" when the module cannot be found (never in practice).
const std::string& build_id();

}  // namespace kiln
