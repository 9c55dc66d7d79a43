#include "jit/compile.h"

#include "cache/disk_cache.h"
#include "cache/key.h"
#include "cache/memory_cache.h"
#include "codegen/backend.h"
#include "ir/passes/fusion.h"
#include "ir/passes/passes.h"
#include "jit/device.h"
#include "jit/dump.h"
#include "support/build_id.h"
#include "support/check.h"
#include "support/log.h"

#include <kiln/errors.h>

#include <chrono>
#include <map>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

namespace kiln {

namespace {

struct KernelChoice {
  std::shared_ptr<CompiledKernel> kernel;
  Backend* backend = nullptr;
  enum class Source : uint8_t { memory, disk, compiled } source = Source::compiled;
};

std::mutex key_override_mu;
std::map<std::string, std::string> key_overrides;

cache::CacheKey kernel_key(const Backend& be, const std::string& group_text) {
  std::vector<std::pair<std::string, std::string>> fields = {
      {"kiln", KILN_VERSION},
      {"kiln_build", build_id()},
      {"backend", be.fingerprint()},
      {"device", cpu_info().fingerprint() +
                     " isa_cap=" + std::to_string(static_cast<int>(global_options().isa))},
      {"options", "abi=1"},
      {"group", group_text}};
  {
    std::lock_guard<std::mutex> lock(key_override_mu);
    for (auto& [name, value] : fields)
      if (auto it = key_overrides.find(name); it != key_overrides.end()) value = it->second;
  }
  cache::KeyBuilder kb;
  for (const auto& [name, value] : fields) kb.add(name, value);
  return kb.finish();
}

// The facts a kernel may rely on about the symbols it uses (part of its key).
std::string describe_facts(const ir::FusionGroup& g, const ir::SymbolFacts& facts) {
  std::string s;
  for (int32_t sym : ir::group_symbols(g)) {
    KILN_CHECK(sym < static_cast<int32_t>(facts.size())) << "symbol s" << sym << " has no facts";
    s += " s" + std::to_string(sym) + (facts[sym].multiple ? ">=2%16" : ">=2");
  }
  return s.empty() ? s : " symbols:" + s;
}

// A backend takes a group's contraction but not its epilogue: the contraction becomes a group
// of its own (materialized) and the epilogue another.
struct EpilogueSplit {
  const ir::Node* node;
  std::string why;
};

KernelChoice get_kernel(const ir::FusionGroup& g, const std::vector<LeafLayout>& layouts,
                        DType out_storage, const CompileRequest& req, int index,
                        const std::string& graph_text, CompileReport& report) {
  using Source = KernelChoice::Source;
  Backend* be = nullptr;
  for (Backend* b : backends()) {
    Backend::Decline d;
    if (b->can_compile(g, layouts, &d)) {
      be = b;
      break;
    }
    if (d.take_bare_contraction) {
      // Keep the fast contraction and run its epilogue as a kernel of its own: a fallback (the
      // epilogue is not applied in registers), counted once compilation settles.
      const ir::Node& c = *g.contraction;
      std::string msg = req.function_name + ": " + std::string(ir::group_kind_name(g.kind)) +
                        " kernel " + std::to_string(index) + ": the " + b->name() +
                        " backend takes " + std::string(ir::op_name(c.op)) + " " +
                        ir::shape_str(c.shape) + (c.loc.empty() ? "" : " (" + c.loc + ")") +
                        " without its epilogue (" + d.why +
                        "); the epilogue runs as a kernel of its own";
      throw EpilogueSplit(g.contraction.get(), std::move(msg));
    }
    if (!d.why.empty()) {
      std::string msg = req.function_name + ": " + std::string(ir::group_kind_name(g.kind)) +
                        " kernel " + std::to_string(index) + " did not take the " + b->name() +
                        " fast path: " + d.why;
      KILN_LOG_AT(warn) << msg;
      report.fallbacks.push_back(msg);
    }
  }
  if (!be) {
    const std::string kind(ir::group_kind_name(g.kind));
    const bool vowel = std::string_view("aeiou").find(kind.front()) != std::string_view::npos;
    throw CompileError("no backend in this build can compile " + std::string(vowel ? "an " : "a ") +
                       kind + " kernel (kiln was built without LLVM)");
  }
  std::string text = describe_group(g, layouts, out_storage) + describe_facts(g, req.guard->facts);
  cache::CacheKey key = kernel_key(*be, text);
  bool want_text = req.keep_text || !global_options().dump_dir.empty();
  KernelRequest kr;
  kr.group = &g;
  kr.layouts = layouts;
  kr.out_storage = out_storage;
  kr.name = req.function_name + "_" + std::string(ir::group_kind_name(g.kind)) + "_" +
            std::to_string(index);
  kr.keep_text = want_text;
  kr.facts = req.guard->facts;
  auto& mem = cache::MemoryCache::global();
  std::shared_ptr<CompiledKernel> k = mem.get(key);
  Source source = Source::memory;
  if (!k || (want_text && k->asm_text.empty())) {
    k = nullptr;
    // The disk cache holds no text: when IR and assembly are wanted, compile.
    auto kind = static_cast<cache::PayloadKind>(be->artifact_kind());
    cache::DiskCache* disk = req.options->cache ? &cache::DiskCache::global() : nullptr;
    if (disk && !disk->enabled()) disk = nullptr;
    if (disk && !want_text) {
      if (auto payload = disk->load(key, kind)) {
        try {
          auto t0 = std::chrono::steady_clock::now();
          k = be->load(kr, *payload);
          k->compile_ms =
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                  .count();
          source = Source::disk;
        } catch (const CompileError& e) {
          // A well-formed entry whose object does not link (another toolchain's bytes under a
          // colliding key): recompile; the store below replaces it.
          KILN_LOG_AT(warn) << "disk cache entry " << key.hex()
                            << " could not be loaded: " << e.what();
        }
      }
    }
    if (!k) {
      std::vector<uint8_t> artifact;
      k = be->compile(kr, &artifact);
      source = Source::compiled;
      KILN_LOG_AT(debug) << "compiled kernel " << kr.name << " (" << be->name() << ", "
                         << k->compile_ms << " ms, key " << key.hex() << ")";
      if (disk && disk->writable() && !artifact.empty()) disk->store(key, kind, artifact);
    }
    k->key = key.hex();
    k->manifest = key.manifest();
    mem.put(key, k);
  }
  if (!global_options().dump_dir.empty())
    write_kernel_dump(global_options().dump_dir, *k, g, graph_text);
  return {k, be, source};
}

// Counts how the kernels of one fusion attempt were obtained. A retry after a split looks up again
// the kernels an earlier attempt made: those memory hits are not events of their own (`seen`: the
// keys of earlier attempts).
void count_sources(const std::vector<KernelChoice>& kernels, std::unordered_set<std::string>& seen,
                   CompileReport& report) {
  std::vector<std::string> keys;
  for (const KernelChoice& c : kernels) {
    switch (c.source) {
      case KernelChoice::Source::memory:
        report.memory_hits += !seen.count(c.kernel->key);
        break;
      case KernelChoice::Source::disk:
        ++report.disk_hits;
        break;
      case KernelChoice::Source::compiled:
        ++report.compiled;
        break;
    }
    keys.push_back(c.kernel->key);
  }
  seen.insert(keys.begin(), keys.end());
}

// A float16/bfloat16 graph output that another kernel also reads is stored rounded to its dtype,
// so that kernel would read it back rounded where the interpreter (and a kernel that computes it
// inline) keeps it exact: returning conv2d(x, w) and conv2d(x, w, b) together, the bias add read
// the rounded convolution. Such an output becomes a cast of the value: the value goes to a
// float32 temp that its readers share, and a copy kernel stores the output, rounded once. An
// output that is a view reads its base the same way (base and views up to the output: any user
// off that chain is another reader).
ir::Graph with_narrow_outputs_copied(ir::Graph g) {
  std::unordered_map<const ir::Node*, std::vector<const ir::Node*>> users;
  for (const ir::NodePtr& n : g.topo_order())
    for (const ir::NodePtr& in : n->inputs) users[in.get()].push_back(n.get());
  auto read_by_other_kernels = [&](const ir::Node* o) {
    std::vector<const ir::Node*> chain = {o};  // o, then each view's input down to the base
    while (ir::is_view(chain.back()->op)) chain.push_back(chain.back()->inputs[0].get());
    const ir::Node* base = chain.back();
    if (base->op == ir::Op::Input || base->op == ir::Op::Constant) return false;
    for (size_t i = 0; i < chain.size(); ++i)
      for (const ir::Node* u : users[chain[i]])
        if (i == 0 || u != chain[i - 1]) return true;
    return false;
  };
  std::unordered_map<const ir::Node*, ir::NodePtr> copy_of;
  for (ir::NodePtr& o : g.outputs) {
    if (temp_storage_dtype(o->dtype) == o->dtype || !read_by_other_kernels(o.get())) continue;
    ir::NodePtr& copy = copy_of[o.get()];
    if (!copy) copy = ir::make_node(ir::Op::Cast, o->dtype, o->shape, {o});
    o = copy;
  }
  return g;
}

}  // namespace

void override_key_field_for_testing(const std::string& field, const std::string& value) {
  std::lock_guard<std::mutex> lock(key_override_mu);
  if (value.empty())
    key_overrides.erase(field);
  else
    key_overrides[field] = value;
}

std::shared_ptr<Executable> compile_executable(const CompileRequest& req, CompileReport& report) {
  const ir::Graph& traced = *req.graph;
  const VariantGuard& guard = *req.guard;
  ir::Graph g = with_narrow_outputs_copied(ir::run_pipeline(traced));
  auto exe = std::make_shared<Executable>();
  exe->graph_text = ir::print(g);

  // Graph outputs are stored in their dtype; float16/bfloat16 temps between kernels in float32.
  std::unordered_set<const ir::Node*> graph_outputs;
  for (const auto& o : g.outputs) graph_outputs.insert(o.get());
  auto storage_of = [&](const ir::Node& n) {
    if (n.op == ir::Op::Input || n.op == ir::Op::Constant || graph_outputs.count(&n))
      return n.dtype;
    return temp_storage_dtype(n.dtype);
  };

  std::unordered_set<const ir::Node*> materialize;
  // Contractions whose epilogue a backend declined, and why (reported once, after the last try).
  std::vector<std::string> splits;
  const size_t fallbacks_before = report.fallbacks.size();
  ir::FusionPlan plan;
  std::vector<KernelChoice> kernels;
  std::vector<std::vector<LeafLayout>> layouts_per_group;
  std::unordered_set<std::string> keys_of_earlier_attempts;
  for (int attempt = 0;; ++attempt) {
    KILN_CHECK(attempt < 64) << "fusion did not converge";
    plan = ir::fuse(g, materialize);
    // The value an output views is stored there: in the output's dtype.
    for (const auto& [out, base] : plan.output_views) graph_outputs.insert(base);
    kernels.clear();
    layouts_per_group.clear();
    report.fallbacks.resize(fallbacks_before);  // a retry meets the same groups again
    bool settled = false;
    try {
      for (size_t gi = 0; gi < plan.groups.size(); ++gi) {
        const ir::FusionGroup& grp = plan.groups[gi];
        std::vector<LeafLayout> layouts;
        int offset = 0;
        for (const auto& leaf : grp.leaves) {
          LeafLayout l;
          l.storage = storage_of(*leaf);
          if (leaf->op == ir::Op::Input && !guard.args[leaf->attrs.arg].contiguous) {
            l.runtime_strides = true;
            l.stride_offset = offset;
            offset += static_cast<int>(leaf->shape.size());
          }
          layouts.push_back(l);
        }
        kernels.push_back(get_kernel(grp, layouts, storage_of(*grp.root), req, static_cast<int>(gi),
                                     exe->graph_text, report));
        layouts_per_group.push_back(std::move(layouts));
      }
      settled = true;
    } catch (const EpilogueSplit& s) {
      KILN_LOG_AT(warn) << s.why;
      splits.push_back(s.why);
      materialize.insert(s.node);
    } catch (const FusionRejected& r) {
      KILN_LOG_AT(debug) << "fusion: materializing " << ir::op_name(r.node->op)
                         << " read across rows of its kernel";
      materialize.insert(r.node);
    }
    // The kernels this attempt got, up to a split or rejection, were got all the same.
    count_sources(kernels, keys_of_earlier_attempts, report);
    if (settled) break;
  }
  report.fallbacks.insert(report.fallbacks.end(), splits.begin(), splits.end());

  // Buffer plan: graph outputs write straight into output arrays; other roots get temps.
  std::unordered_map<const ir::Node*, BufferSlot> slot_of;
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    const ir::Node* o = g.outputs[i].get();
    OutputSpec spec;
    spec.shape = o->shape;
    exe->symbolic = exe->symbolic || !ir::is_concrete(o->shape);
    spec.dtype = o->dtype;
    // An output view's slot is its base's (the base's kernel stores into the output array, and
    // kernels reading the view read it there).
    auto view = plan.output_views.find(o);
    const ir::Node* stored = view != plan.output_views.end() ? view->second : o;
    auto it = slot_of.find(stored);
    if (it != slot_of.end()) {
      spec.alias_of = it->second.index;  // the same output again
    } else {
      slot_of[stored] = BufferSlot{BufferSlot::Kind::output, static_cast<int>(i)};
      slot_of[o] = slot_of[stored];
    }
    exe->outputs.push_back(spec);
  }
  std::unordered_map<const ir::ConstantData*, int> const_index;
  auto leaf_slot = [&](const ir::NodePtr& leaf) -> BufferSlot {
    if (leaf->op == ir::Op::Input)
      return {BufferSlot::Kind::input, static_cast<int>(leaf->attrs.arg)};
    if (leaf->op == ir::Op::Constant) {
      auto [it, fresh] =
          const_index.emplace(leaf->attrs.data.get(), static_cast<int>(exe->constants.size()));
      if (fresh) exe->constants.push_back(leaf->attrs.data);
      return {BufferSlot::Kind::constant, it->second};
    }
    auto it = slot_of.find(leaf.get());
    KILN_CHECK(it != slot_of.end())
        << "leaf " << ir::op_name(leaf->op) << " used before it is computed";
    return it->second;
  };
  for (size_t gi = 0; gi < plan.groups.size(); ++gi) {
    const ir::FusionGroup& grp = plan.groups[gi];
    Launch l;
    l.kernel = kernels[gi].kernel;
    l.spec = schedule_spec_for(grp);
    if (!l.spec.symbolic) l.sched = l.spec.eval(nullptr);
    for (size_t j = 0; j < grp.leaves.size(); ++j) {
      l.slots.push_back(leaf_slot(grp.leaves[j]));
      if (layouts_per_group[gi][j].runtime_strides)
        l.runtime_stride_args.push_back(static_cast<int>(grp.leaves[j]->attrs.arg));
    }
    const ir::Node* root = grp.root.get();
    auto it = slot_of.find(root);
    if (it == slot_of.end()) {
      int t = static_cast<int>(exe->temp_shapes.size());
      const auto elem = static_cast<int64_t>(dtype_size(storage_of(*root)));
      exe->temp_shapes.push_back(root->shape);
      exe->temp_elem_bytes.push_back(elem);
      if (ir::is_concrete(root->shape)) {
        exe->temp_offsets.push_back(exe->temp_bytes);
        exe->temp_bytes += (ir::numel(root->shape) * elem + 63) / 64 * 64;
      } else {
        exe->symbolic = true;
      }
      it = slot_of.emplace(root, BufferSlot{BufferSlot::Kind::temp, t}).first;
    }
    l.slots.push_back(it->second);
    KernelInfo info;
    info.name = l.kernel->name;
    info.backend = l.kernel->backend;
    info.key = l.kernel->key;
    info.asm_text = l.kernel->asm_text;
    info.source = l.kernel->source;
    info.ops = l.kernel->ops;
    exe->kernel_infos.push_back(std::move(info));
    report.backends.push_back(l.kernel->backend);
    exe->launches.push_back(std::move(l));
  }
  report.kernels = static_cast<int>(plan.groups.size());
  return exe;
}

}  // namespace kiln
