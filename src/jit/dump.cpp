#include "jit/dump.h"

#include "support/log.h"

#include <filesystem>
#include <fstream>
#include <set>

namespace kiln {

namespace fs = std::filesystem;

namespace {
bool write_file(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << text;
  return static_cast<bool>(f);
}
}  // namespace

void write_kernel_dump(const std::string& dir, const CompiledKernel& k, const ir::FusionGroup& g,
                       const std::string& graph_text) {
  try {
    fs::path d = fs::path(dir) / k.key;
    fs::create_directories(d);
    std::string manifest = "name: " + k.name + "\nbackend: " + k.backend + "\nkey: " + k.key + "\n";
    manifest += "kind: " + std::string(ir::group_kind_name(g.kind)) + "\n";
    std::set<std::string> lines;
    for (const auto& n : g.nodes)
      if (!n->loc.empty()) lines.insert(n->loc);
    manifest += "source:";
    for (const auto& l : lines) manifest += " " + l;
    manifest += "\n--- key fields\n" + k.manifest;
    std::string group = "root: " + std::string(ir::op_name(g.root->op)) + "\n";
    for (const auto& n : g.nodes)
      group += std::string(ir::op_name(n->op)) + " " + std::string(dtype_name(n->dtype)) +
               ir::shape_str(n->shape) + (n->loc.empty() ? "" : "  @ " + n->loc) + "\n";
    bool ok = write_file(d / "manifest.txt", manifest) && write_file(d / "group.txt", group) &&
              write_file(d / "graph.txt", graph_text);
    if (!k.source.empty()) ok = ok && write_file(d / "kernel.ll", k.source);
    if (!k.asm_text.empty()) ok = ok && write_file(d / "kernel.s", k.asm_text);
    if (!ok) KILN_LOG_AT(warn) << "KILN_DUMP: could not write all files under " << d.string();
  } catch (const std::exception& e) {
    KILN_LOG_AT(warn) << "KILN_DUMP: " << e.what();
  }
}

}  // namespace kiln
