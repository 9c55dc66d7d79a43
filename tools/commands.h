// Subcommands of the `kiln` command line; each returns the process exit code.
#pragma once

#include <string>
#include <vector>

namespace kiln::tools {

int run_doctor(const std::vector<std::string>& args);
int run_inspect(const std::vector<std::string>& args);
int run_cache(const std::vector<std::string>& args);
// Prints one disk cache entry (header and manifest) after verifying it.
int run_inspect_cache_entry(const std::string& path);

}  // namespace kiln::tools
