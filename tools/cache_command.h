// The `kiln cache ...` subcommand of the command line, on the directory kiln::global_options()
// names (KILN_CACHE_DIR / XDG_CACHE_HOME / ~/.cache/kiln).
#pragma once

#include <string>
#include <vector>

namespace kiln::tools {

// `args` are the words after `kiln cache`: ls | stats | verify | clear | explain KEY1 KEY2.
// Prints to stdout/stderr; returns the process exit code (0 ok, 1 failure, 2 usage).
int run_cache_command(const std::vector<std::string>& args);

}  // namespace kiln::tools
