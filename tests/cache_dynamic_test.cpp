// Shape decisions persist: with the disk cache on, a new process starts with the symbolic dims an
// earlier process settled on (dynamic="auto"), instead of compiling an exact variant first and
// rediscovering them. Each process is this test binary re-executed with one hidden test.
#include "child_process.h"
#include "jit_test_util.h"
#include "needs_llvm.h"

#include <kiln/kiln.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

using namespace jt;
using kiln::Tensor;

namespace {

constexpr const char* kProbeName = "dynamic decisions probe";

Tensor program(Tensor x, Tensor w) { return kiln::softmax(kiln::matmul(x, w) * 0.5f); }

struct ProbeRun {
  bool ok = false;
  std::string log;
};

ProbeRun run_probe(const std::string& cache_dir, const std::string& lengths) {
  auto env = kiln_test::environment_without_kiln();
  env.push_back("KILN_CACHE_DIR=" + cache_dir);
  env.push_back("KILN_LOG=info");
  env.push_back("KILN_PROBE_LENGTHS=" + lengths);
  std::string log = cache_dir + "/probe-" + lengths + ".log";
  pid_t pid = kiln_test::spawn_self(kProbeName, env, log);
  REQUIRE(pid > 0);
  ProbeRun r;
  r.ok = kiln_test::wait_child(pid, std::chrono::seconds(180));
  r.log = kiln_test::slurp(log);
  return r;
}

}  // namespace

// Run only as a child of the test below: calls `program` once per length in KILN_PROBE_LENGTHS,
// checks each result, and prints the compile count and the recompile reasons.
TEST_CASE("dynamic decisions probe", "[.probe]") {
  const char* lengths = std::getenv("KILN_PROBE_LENGTHS");
  REQUIRE(lengths != nullptr);
  Rng rng(11);
  auto w = make_array(rng, {24, 40}, DType::f32);
  kiln::Function f = kiln::jit(program);
  std::stringstream ss(lengths);
  std::string item;
  while (std::getline(ss, item, ',')) {
    auto x = make_array(rng, {std::stoll(item), 24}, DType::f32);
    CheckOptions opt;
    opt.function = &f;
    opt.tol_scale = 24;
    REQUIRE(check_against_reference(program, {x, w}, opt));
  }
  auto st = f.stats();
  std::printf("compiles=%lld\n", static_cast<long long>(st.compiles));
  for (const auto& r : st.recompile_reasons) std::printf("reason: %s\n", r.c_str());
}

TEST_CASE("the symbolic dims a process settled on are restored by the next",
          "[cache][dynamic]" KILN_NEEDS_LLVM) {
  auto dir = std::filesystem::temp_directory_path() /
             ("kiln-dynamic-" + std::to_string(::getpid()) + "-" + std::to_string(std::rand()));
  std::filesystem::create_directories(dir);
  std::filesystem::permissions(dir, std::filesystem::perms::owner_all);

  ProbeRun first = run_probe(dir.string(), "5,9,13");
  INFO(first.log);
  REQUIRE(first.ok);
  CHECK(first.log.find("compiles=2") != std::string::npos);
  CHECK(first.log.find("arg 0 dim 0: 5 -> 9, now symbolic") != std::string::npos);

  // A new process: its first call compiles the symbolic variant directly (its kernels come from
  // the disk cache), and later lengths need no compile.
  ProbeRun second = run_probe(dir.string(), "21,34,50");
  INFO(second.log);
  REQUIRE(second.ok);
  CHECK(second.log.find("compiles=1") != std::string::npos);
  CHECK(second.log.find("restored shape decisions") != std::string::npos);
  CHECK(second.log.find("variant float32[s0,24] float32[24,40]") != std::string::npos);

  // A different program (other weights' shape) does not pick up those decisions.
  std::filesystem::remove_all(dir);
}
