#include "cache/memory_cache.h"

namespace kiln::cache {

MemoryCache& MemoryCache::global() {
  static MemoryCache c(4096, size_t{512} << 20);
  return c;
}

std::shared_ptr<CompiledKernel> MemoryCache::get(const CacheKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->kernel;
}

void MemoryCache::put(const CacheKey& key, std::shared_ptr<CompiledKernel> kernel) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(key);
  if (it != index_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second);
    return;  // keep the first: callers may already run it
  }
  bytes_ += kernel->code_bytes;
  lru_.push_front(Entry{key, std::move(kernel)});
  index_[key] = lru_.begin();
  evict_locked();
}

void MemoryCache::evict_locked() {
  while (lru_.size() > 1 && (lru_.size() > max_entries_ || bytes_ > max_bytes_)) {
    Entry& e = lru_.back();
    bytes_ -= e.kernel->code_bytes;
    index_.erase(e.key);
    lru_.pop_back();
    ++evictions_;
  }
}

void MemoryCache::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  lru_.clear();
  index_.clear();
  bytes_ = 0;
}

size_t MemoryCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

size_t MemoryCache::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

int64_t MemoryCache::evictions() const {
  std::lock_guard<std::mutex> lock(mu_);
  return evictions_;
}

}  // namespace kiln::cache
