#include "cache_command.h"

#include <kiln/options.h>

#include <iostream>

#include "cache/cache_cli.h"

namespace kiln::tools {

int run_cache_command(const std::vector<std::string>& args) {
  return cache::run_cache_cli(args, cache::DiskCacheConfig::from_options(global_options()),
                              std::cout, std::cerr);
}

}  // namespace kiln::tools
