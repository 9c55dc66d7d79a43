// The in-memory kernel cache: compiled kernels by cache key, bounded in entries and code bytes,
// least recently used evicted first. Eviction drops the cache's reference; the JIT code is freed
// once no Executable uses it any more.
#pragma once

#include "cache/key.h"
#include "codegen/kernel.h"

#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace kiln::cache {

class MemoryCache {
 public:
  MemoryCache(size_t max_entries, size_t max_bytes)
      : max_entries_(max_entries), max_bytes_(max_bytes) {}
  static MemoryCache& global();

  std::shared_ptr<CompiledKernel> get(const CacheKey& key);
  void put(const CacheKey& key, std::shared_ptr<CompiledKernel> kernel);
  void clear();
  size_t size() const;
  size_t bytes() const;
  int64_t evictions() const;

 private:
  struct Entry {
    CacheKey key;
    std::shared_ptr<CompiledKernel> kernel;
  };
  void evict_locked();

  size_t max_entries_, max_bytes_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // front: most recent
  std::unordered_map<CacheKey, std::list<Entry>::iterator, KeyHash> index_;
  size_t bytes_ = 0;
  int64_t evictions_ = 0;
};

}  // namespace kiln::cache
