// The kernel registry: descriptor -> generated code, generated once per process. Lookups take a
// shared lock; generation runs with no lock held (two threads racing on one cold descriptor may
// both generate it, and the loser's code is released).
//
// Kernels are also kept in the on-disk cache (DiskCache, PayloadKind::x86_blob) so that a new
// process loads them instead of running asmjit again. A blob is a small header, the descriptor it
// was generated for (echoed and compared on load), a relocation table and the code bytes (the
// asmjit listing is not kept: kernel_listing() makes it again from the descriptor). Relocation:
// every label reference is rip-relative inside the one code buffer, so the whole buffer is valid at
// any address, except for the constant table's address, which load_const_base() (vec_emit.cpp)
// bakes in as a movabs immediate; its offsets are recorded while the kernel is generated, zeroed in
// the blob and patched with this process's address on load. Only such kernels are cached: one
// section, no asmjit relocation entries (absolute addresses, calls to host functions, cross-section
// references, an address table), and the constant table's address found in the code exactly at the
// recorded offsets. Anything else is not stored (counted as not cacheable); none of today's
// generators emit it.
#include "codegen/x86/kernel_registry.h"

#include "cache/disk_cache.h"
#include "cache/key.h"
#include "codegen/x86/generators.h"
#include "codegen/x86/vec_emit.h"
#include "jit/device.h"
#include "support/build_id.h"
#include "support/check.h"

#include <kiln/options.h>

#include <asmjit/x86.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <span>
#include <unordered_map>
#include <vector>

#ifndef KILN_VERSION
#error "KILN_VERSION must be defined for libkiln sources"
#endif

namespace kiln::x86 {

bool KernelDesc::operator==(const KernelDesc& o) const {
  return std::memcmp(this, &o, sizeof(*this)) == 0;
}

std::string KernelDesc::name() const {
  std::string s = kind == KernelKind::packed   ? "packed_"
                  : kind == KernelKind::direct ? "direct_"
                  : kind == KernelKind::stream ? "stream_"
                                               : "dot_";
  s += isa_name(Isa(isa));
  auto num = [](int64_t v) { return std::to_string(v); };
  if (kind == KernelKind::packed) {
    s += "_" + num(MR) + "x" + num(NR) + "_m" + num(rows) + "n" + num(cols);
    if (a_rs) s += "_packa" + num(a_rs);
    if (b_rs) s += "_packb" + num(b_rs);
    if (panel_loop) s += "_loop";
    if (accumulate) s += "_acc";
  } else if (kind == KernelKind::stream && rows > 1) {
    s += "_M" + num(rows) + "N" + num(cols) + "_a" + num(a_rs) + "," + num(a_cs) + "_b" +
         num(b_rs) + "_c" + num(ldc);
  } else if (kind == KernelKind::stream) {
    s += "_N" + num(cols) + "_a" + num(a_cs) + "_b" + num(b_rs);
  } else if (kind == KernelKind::dot) {
    s += "_N" + num(cols) + "K" + num(K) + "_b" + num(b_rs);
    if (ldc != 1) s += "_c" + num(ldc);
    if (rows >= 2) s += "_v" + num(rows) + "a" + num(a_rs);
    if (k_align) s += "_ka";
  } else {
    s += "_M" + num(rows) + "N" + num(cols) + "K" + num(K) + "_a" + num(a_rs) + "," + num(a_cs) +
         "_b" + num(b_rs) + "_c" + num(ldc);
    if (b_prefetch) s += "_pf" + num(b_prefetch);
    if (rows_cap) s += "_r" + num(rows_cap);
    if (cols_outer) s += "_co";
    if (accumulate) s += "_acc";
  }
  if (last) {
    if (has_scale) s += "_scale";
    if (has_col_scale) s += bias_bcast ? "_cscale1" : "_cscale";
    if (has_bias) s += bias_bcast ? "_bias1" : "_bias";
    static const char* const kActs[] = {"", "_relu", "_gelu", "_gelu_tanh", "_silu"};
    s += kActs[act];
    if (has_residual)
      s += std::string(has_residual == kResidualMul ? "_gate" : "_res") +
           (kind == KernelKind::direct || kind == KernelKind::dot ||
                    (kind == KernelKind::stream && rows > 1)
                ? num(ld_res)
                : std::string());
  } else {
    s += "_partial";
  }
  return s;
}

namespace {

static_assert(sizeof(KernelDesc) % sizeof(int64_t) == 0);

struct DescHash {
  size_t operator()(const KernelDesc& d) const {
    const auto* p = reinterpret_cast<const unsigned char*>(&d);
    uint64_t h = 1469598103934665603ull;  // FNV-1a
    for (size_t i = 0; i < sizeof(d); ++i) h = (h ^ p[i]) * 1099511628211ull;
    return size_t(h);
  }
};

// ---------------------------------------------------------------------------------------------
// The x86 blob: the payload of a PayloadKind::x86_blob disk-cache entry. All integers are
// little-endian uint64 (x86 only), read one by one with bounds checks; nothing is constructed from
// the bytes.
//
//   magic "KILNX86B" | format version | header bytes | relocation count |
//   code alignment | entry offset | code bytes | descriptor bytes |
//   codegen ns (of the process that generated it) |
//   descriptor | relocation offsets (one uint64 each: 8 code bytes that get the constant table's
//   address) | code (with those bytes zero)

constexpr char kBlobMagic[8] = {'K', 'I', 'L', 'N', 'X', '8', '6', 'B'};
constexpr uint64_t kBlobVersion = 22;  // 6: KernelDesc::bias_bcast; 7: b_prefetch; 8: rows_cap;
                                       // 9: cols_outer; 10: has_col_scale; 11: k_align;
                                       // 12: no b_prefetch past the last K block;
                                       // 13: AVX2 edges by xmm moves, not vmaskmovps;
                                       // 14: AVX2 k_align steps ANDed where aligned;
                                       // 15: and by xmm moves where not;
                                       // 16: packed tiles of few accumulators in two sets,
                                       // packed kernels packing B (b_rs); 17: panel_loop;
                                       // 18: gelu's ratio in x, its constants moved;
                                       // 19: narrow AVX2 packed edge tiles;
                                       // 20: direct tiles prefetch A's next rows, C's next tile;
                                       // 21: stream kernels over a few rows of C;
                                       // 22: direct tiles of two vectors broadcast A once
constexpr uint64_t kMaxRelocs = 64;    // one per kernel today
constexpr uint64_t kBlobHeaderBytes = 8 + 8 * 8;
constexpr uint64_t kMaxCodeBytes = uint64_t{1} << 20;  // real kernels are a few KiB
constexpr uint64_t kMaxAlignment = 64;  // JitAllocator's granularity; never more is asked for

void put_u64(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(uint8_t(v >> (8 * i)));
}

std::vector<uint8_t> encode_blob(const KernelDesc& d, const void* code, size_t code_size,
                                 const std::vector<uint64_t>& relocs, uint64_t alignment,
                                 int64_t codegen_ns) {
  std::vector<uint8_t> out;
  out.reserve(kBlobHeaderBytes + sizeof(d) + 8 * relocs.size() + code_size);
  out.insert(out.end(), kBlobMagic, kBlobMagic + 8);
  put_u64(out, kBlobVersion);
  put_u64(out, kBlobHeaderBytes);
  put_u64(out, relocs.size());
  put_u64(out, alignment);
  put_u64(out, 0);  // entry offset: the function starts at the buffer's start
  put_u64(out, code_size);
  put_u64(out, sizeof(d));
  put_u64(out, uint64_t(codegen_ns));
  const auto* dp = reinterpret_cast<const uint8_t*>(&d);
  out.insert(out.end(), dp, dp + sizeof(d));
  for (uint64_t r : relocs) put_u64(out, r);
  const auto* cp = static_cast<const uint8_t*>(code);
  const size_t code_start = out.size();
  out.insert(out.end(), cp, cp + code_size);
  for (uint64_t r : relocs) std::memset(out.data() + code_start + r, 0, 8);
  return out;
}

struct BlobView {
  uint64_t alignment = 1, entry_offset = 0;
  std::vector<uint64_t> relocs;
  std::span<const uint8_t> code;
};

// A view of a valid blob for `d`, or nothing (any inconsistency is a miss).
std::optional<BlobView> decode_blob(std::span<const uint8_t> b, const KernelDesc& d) {
  if (b.size() < kBlobHeaderBytes) return std::nullopt;
  if (std::memcmp(b.data(), kBlobMagic, 8) != 0) return std::nullopt;
  auto u64 = [&](size_t index) {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t(b[8 + index * 8 + size_t(i)]) << (8 * i);
    return v;
  };
  const uint64_t version = u64(0), header = u64(1), relocs = u64(2), align = u64(3), entry = u64(4),
                 code_size = u64(5), desc_size = u64(6);
  if (version != kBlobVersion || header != kBlobHeaderBytes || relocs > kMaxRelocs)
    return std::nullopt;
  if (align == 0 || align > kMaxAlignment || (align & (align - 1)) != 0) return std::nullopt;
  if (code_size == 0 || code_size > kMaxCodeBytes || entry >= code_size) return std::nullopt;
  if (desc_size != sizeof(KernelDesc)) return std::nullopt;
  // Each size is bounded above, so the sum cannot overflow.
  if (uint64_t(b.size()) != header + desc_size + 8 * relocs + code_size) return std::nullopt;
  const uint8_t* p = b.data() + header;
  if (std::memcmp(p, &d, sizeof(d)) != 0) return std::nullopt;  // a different descriptor
  p += desc_size;
  BlobView v;
  for (uint64_t i = 0; i < relocs; ++i, p += 8) {
    uint64_t off = 0;
    for (int j = 0; j < 8; ++j) off |= uint64_t(p[j]) << (8 * j);
    if (off > code_size - 8 || code_size < 8) return std::nullopt;  // the 8 bytes lie in the code
    v.relocs.push_back(off);
  }
  v.alignment = align;
  v.entry_offset = entry;
  v.code = std::span<const uint8_t>(p, size_t(code_size));
  return v;
}

// Every descriptor field, by name, in declaration order.
std::string canonical_text(const KernelDesc& d) {
  std::string s;
  auto f = [&](const char* name, int64_t v) {
    s += name;
    s += '=';
    s += std::to_string(v);
    s += ';';
  };
  f("kind", int64_t(d.kind));
  f("isa", d.isa);
  f("rows", d.rows);
  f("cols", d.cols);
  f("MR", d.MR);
  f("NR", d.NR);
  f("K", d.K);
  f("a_rs", d.a_rs);
  f("a_cs", d.a_cs);
  f("b_rs", d.b_rs);
  f("ldc", d.ldc);
  f("ld_res", d.ld_res);
  f("accumulate", d.accumulate);
  f("last", d.last);
  f("has_bias", d.has_bias);
  f("has_scale", d.has_scale);
  f("act", d.act);
  f("has_residual", d.has_residual);
  f("has_col_scale", d.has_col_scale);
  f("bias_bcast", d.bias_bcast);
  f("b_prefetch", d.b_prefetch);
  f("rows_cap", d.rows_cap);
  f("cols_outer", d.cols_outer);
  f("k_align", d.k_align);
  f("panel_loop", d.panel_loop);
  return s;
}
// A field added to KernelDesc must be added to canonical_text() (and bumps kBlobVersion).
static_assert(sizeof(KernelDesc) == 25 * sizeof(int64_t));

cache::CacheKey blob_key(const KernelDesc& d) {
  char cpu[32];
  std::snprintf(cpu, sizeof cpu, "%016llx", (unsigned long long)cpu_info().usable_features);
  return cache::KeyBuilder()
      .add("kiln", KILN_VERSION)
      .add("kiln_build", build_id())
      .add("asmjit", int64_t(ASMJIT_LIBRARY_VERSION))
      .add("kind", "x86_kernel")
      .add("blob_version", int64_t(kBlobVersion))
      .add("isa", isa_name(Isa(d.isa)))
      .add("descriptor", canonical_text(d))
      .add("cpu", cpu)
      .finish();
}

bool disk_cache_usable() {
  if (global_options().cache == CacheMode::off) return false;
  return cache::DiskCache::global().enabled();
}

void atomic_max(std::atomic<int64_t>& m, int64_t v) {
  int64_t prev = m.load();
  while (v > prev && !m.compare_exchange_weak(prev, v)) {
  }
}

class Registry {
 public:
  const Kernel& get(const KernelDesc& d) {
    {
      std::shared_lock lock(mu_);
      auto it = map_.find(d);
      if (it != map_.end()) return *it->second;
    }
    std::optional<cache::CacheKey> key;
    if (disk_cache_usable()) key = blob_key(d);
    std::unique_ptr<Kernel> k = key ? load(d, *key) : nullptr;
    if (!k) k = generate(d, key ? &*key : nullptr);
    std::unique_lock lock(mu_);
    auto [it, inserted] = map_.try_emplace(d, std::move(k));
    if (!inserted) {
      // Lost a race: keep the published kernel (its code may already be running elsewhere).
      std::lock_guard rt_lock(rt_mu_);
      rt_.release(k->fn);
    }
    return *it->second;
  }

  std::atomic<int64_t> generated{0};
  std::atomic<int64_t> codegen_ns{0};
  std::atomic<int64_t> codegen_ns_max{0};
  std::atomic<int64_t> loaded{0};
  std::atomic<int64_t> load_ns{0};
  std::atomic<int64_t> load_ns_max{0};
  std::atomic<int64_t> stored{0};
  std::atomic<int64_t> not_cacheable{0};

 private:
  // The kernel from its disk-cache blob, or null (miss, malformed blob, allocation failure).
  std::unique_ptr<Kernel> load(const KernelDesc& d, const cache::CacheKey& key) {
    auto start = std::chrono::steady_clock::now();
    std::optional<std::vector<uint8_t>> bytes =
        cache::DiskCache::global().load(key, cache::PayloadKind::x86_blob);
    if (!bytes) return nullptr;
    std::optional<BlobView> blob = decode_blob(*bytes, d);
    if (!blob) return nullptr;
    void* rx = nullptr;
    void* rw = nullptr;
    {
      std::lock_guard rt_lock(rt_mu_);
      if (rt_.allocator()->alloc(&rx, &rw, blob->code.size()) != asmjit::kErrorOk) return nullptr;
    }
    if (reinterpret_cast<uintptr_t>(rx) % blob->alignment != 0) {
      std::lock_guard rt_lock(rt_mu_);
      rt_.allocator()->release(rx);
      return nullptr;
    }
    {
      asmjit::VirtMem::ProtectJitReadWriteScope scope(rx, blob->code.size());
      std::memcpy(rw, blob->code.data(), blob->code.size());
      const uint64_t table = reinterpret_cast<uintptr_t>(const_table_address());
      for (uint64_t off : blob->relocs) std::memcpy(static_cast<uint8_t*>(rw) + off, &table, 8);
    }  // the scope's destructor flushes the instruction cache
    auto k = std::make_unique<Kernel>();
    k->fn = reinterpret_cast<KernelFn>(static_cast<uint8_t*>(rx) + blob->entry_offset);
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                  std::chrono::steady_clock::now() - start)
                  .count();
    k->desc = d;
    k->info.name = d.name();
    k->info.codegen_ms = double(ns) * 1e-6;  // what this process spent: the load
    k->info.code_bytes = int64_t(blob->code.size());
    k->info.loaded_from_disk = true;
    loaded.fetch_add(1);
    load_ns.fetch_add(ns);
    atomic_max(load_ns_max, ns);
    return k;
  }

  // Relocatable by the blob's rules (see the top of this file): asmjit needs no relocation, and
  // the constant table's address occurs in the final code exactly at the recorded offsets.
  static bool relocatable(const asmjit::CodeHolder& code, const uint8_t* bytes, size_t size,
                          const std::vector<uint64_t>& sites) {
    if (code.sectionCount() != 1 || !code.relocEntries().empty() || code.hasAddressTable() ||
        code.hasUnresolvedLinks() || sites.size() > kMaxRelocs)
      return false;
    const uint64_t table = reinterpret_cast<uintptr_t>(const_table_address());
    size_t found = 0;
    for (size_t i = 0; i + 8 <= size; ++i) {
      if (std::memcmp(bytes + i, &table, 8) != 0) continue;
      if (std::find(sites.begin(), sites.end(), uint64_t(i)) == sites.end()) return false;
      ++found;
    }
    return found == sites.size();
  }

  // The code of `d` emitted into `code` (its constant-table sites into `sites`).
  static void emit(const KernelDesc& d, asmjit::CodeHolder& code, std::vector<uint64_t>* sites) {
    asmjit::x86::Assembler a(&code);
    ConstBaseSiteRecorder recorder(sites);
    switch (d.kind) {
      case KernelKind::packed:
        emit_packed_kernel(a, d);
        break;
      case KernelKind::direct:
        emit_direct_kernel(a, d);
        break;
      case KernelKind::stream:
        if (d.rows > 1)
          emit_stream_rows_kernel(a, d);
        else
          emit_stream_kernel(a, d);
        break;
      case KernelKind::dot:
        emit_dot_kernel(a, d);
        break;
    }
  }

 public:
  // The listing of `d`'s code: the same generator run again with asmjit's logger attached, into a
  // CodeHolder that is never made executable. Generators are deterministic, so this is the code
  // that runs; formatting it is ~85% of a generation, so kernels are generated without it.
  std::string listing(const KernelDesc& d) {
    asmjit::CodeHolder code;
    code.init(rt_.environment());
    asmjit::StringLogger logger;
    code.setLogger(&logger);
    std::vector<uint64_t> sites;
    emit(d, code, &sites);
    return "; " + d.name() + "\n" + std::string(logger.data(), logger.dataSize());
  }

 private:
  std::unique_ptr<Kernel> generate(const KernelDesc& d, const cache::CacheKey* key) {
    auto start = std::chrono::steady_clock::now();
    asmjit::CodeHolder code;
    code.init(rt_.environment());
    std::vector<uint64_t> sites;  // of the constant table's address
    emit(d, code, &sites);
    auto k = std::make_unique<Kernel>();
    asmjit::Error err;
    {
      std::lock_guard rt_lock(rt_mu_);
      err = rt_.add(&k->fn, &code);
    }
    KILN_CHECK(err == asmjit::kErrorOk)
        << "asmjit failed on " << d.name() << ": " << asmjit::DebugUtils::errorAsString(err);
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                  std::chrono::steady_clock::now() - start)
                  .count();
    k->desc = d;
    k->info.name = d.name();
    k->info.codegen_ms = double(ns) * 1e-6;
    k->info.code_bytes = int64_t(code.codeSize());
    generated.fetch_add(1);
    codegen_ns.fetch_add(ns);
    atomic_max(codegen_ns_max, ns);
    if (key && cache::DiskCache::global().writable()) {
      // Kernels that are not position independent are not cached (see the top of this file).
      // A failed store is not an error: the next process generates the kernel again.
      const auto* bytes = reinterpret_cast<const uint8_t*>(k->fn);
      const size_t size = code.codeSize();
      const uint64_t align = std::max<uint64_t>(1, code.textSection()->alignment());
      if (relocatable(code, bytes, size, sites) && size > 0 && size <= kMaxCodeBytes &&
          align <= kMaxAlignment) {
        {
          std::vector<uint8_t> blob = encode_blob(d, bytes, size, sites, align, ns);
          // Without the fsync: a blob torn by a crash fails its checksum on load and costs one
          // generation (about 0.01 ms), while an fsync took 0.3-0.6 ms on every kernel's first
          // call here (see cache::Durability).
          if (cache::DiskCache::global().store(*key, cache::PayloadKind::x86_blob, blob,
                                               cache::Durability::checksummed))
            stored.fetch_add(1);
        }
      } else {
        not_cacheable.fetch_add(1);
      }
    }
    return k;
  }

  std::shared_mutex mu_;
  std::unordered_map<KernelDesc, std::unique_ptr<Kernel>, DescHash> map_;
  std::mutex rt_mu_;
  asmjit::JitRuntime rt_;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: code may run during static destruction
  return *r;
}

}  // namespace

const Kernel& get_kernel(const KernelDesc& desc) { return registry().get(desc); }

const std::string& kernel_listing(const Kernel& k) {
  std::call_once(k.listing_once, [&] { k.listing = registry().listing(k.desc); });
  return k.listing;
}

int64_t kernels_generated() { return registry().generated.load(); }
int64_t kernels_loaded_from_disk() { return registry().loaded.load(); }
int64_t kernels_stored_to_disk() { return registry().stored.load(); }
int64_t kernels_not_cacheable() { return registry().not_cacheable.load(); }
double disk_load_ms_total() { return double(registry().load_ns.load()) * 1e-6; }
double disk_load_ms_max() { return double(registry().load_ns_max.load()) * 1e-6; }
double codegen_ms_total() { return double(registry().codegen_ns.load()) * 1e-6; }
double codegen_ms_max() { return double(registry().codegen_ns_max.load()) * 1e-6; }

}  // namespace kiln::x86
