// `kiln cache ls|stats|verify|clear|explain KEY1 KEY2`: the cache subcommands, written against a
// DiskCacheConfig and output streams so that tests can run them on their own directories.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "cache/disk_cache.h"

namespace kiln::cache {

// `args` are the words after `kiln cache`. ls, stats and explain open the directory read-only and
// create nothing; verify and clear open it writable unless cfg.mode is readonly. The directory is
// used even when cfg.mode is off: the user asked for it by name. Returns the process exit code:
// 0 success, 1 a problem found or an operation failed, 2 a usage error.
int run_cache_cli(const std::vector<std::string>& args, const DiskCacheConfig& cfg,
                  std::ostream& out, std::ostream& err);

}  // namespace kiln::cache
