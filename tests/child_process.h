// Test helpers for tests that run part of themselves in a child process (the test binary
// re-executing itself with one hidden Catch2 test selected), e.g. to get a fresh global_options()
// from a chosen environment: spawn with a given environment and log file, wait with a deadline.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace kiln_test {

inline std::string self_exe() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return {};
  buf[n] = 0;
  return buf;
}

inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// This process's environment without KILN_* variables (except those listed in `keep`).
inline std::vector<std::string> environment_without_kiln(
    const std::vector<std::string>& keep = {}) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    bool kiln = std::strncmp(*e, "KILN_", 5) == 0;
    for (const auto& k : keep) kiln = kiln && std::strncmp(*e, k.c_str(), k.size()) != 0;
    if (!kiln) env.emplace_back(*e);
  }
  return env;
}

// Starts this test binary running only `test_name`, with `env`, stdout+stderr to `log_path`.
// Returns the pid, or -1 if the spawn failed.
inline pid_t spawn_self(const std::string& test_name, std::vector<std::string> env,
                        const std::string& log_path) {
  std::vector<char*> envp;
  for (auto& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string exe = self_exe();
  if (exe.empty()) return -1;
  std::string name = test_name;
  std::vector<char*> argv = {exe.data(), name.data(), nullptr};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, exe.c_str(), &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  return rc == 0 ? pid : -1;
}

// Waits for `pid` until `timeout`, then kills it; returns true when it exited with status 0.
inline bool wait_child(pid_t pid, std::chrono::seconds timeout) {
  int status = 0;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0) return false;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace kiln_test
