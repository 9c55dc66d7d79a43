// What kiln's thread pool costs a job of one part per thread, against an OpenMP parallel loop of
// the same parts, in one run: jobs back to back, each part busy for W microseconds. For each W it
// reports the job's time over W (the pool's overhead; quartiles over the jobs), how late the last
// part started after the job began, and the share of jobs in which some thread ran two parts
// (a worker that came too late for its own: the job then takes about 2W).
//
//   build/benchmarks/pool_bench [--threads=N] [--jobs=N] [--work=US,US,...]
#include "jit/thread_pool.h"
#include "limits.h"
#include "paired.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;

struct Options {
  int threads = int(std::thread::hardware_concurrency());
  int jobs = 2000;
  std::vector<double> work_us = {5, 20, 100, 300};
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--threads=", 0) == 0) {
      o.threads = std::max(1, std::atoi(a.c_str() + 10));
    } else if (a.rfind("--jobs=", 0) == 0) {
      o.jobs = std::max(10, std::atoi(a.c_str() + 7));
    } else if (a.rfind("--work=", 0) == 0) {
      o.work_us.clear();
      for (size_t p = 7; p < a.size();) {
        const size_t q = std::min(a.find(',', p), a.size());
        o.work_us.push_back(std::atof(a.substr(p, q - p).c_str()));
        p = q + 1;
      }
    } else {
      std::fprintf(stderr, "usage: pool_bench [--threads=N] [--jobs=N] [--work=US,US,...]\n");
      std::exit(2);
    }
  }
  return o;
}

double us_between(clock_type::time_point a, clock_type::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

void busy_for(double us) {
  const auto until = clock_type::now() + std::chrono::nanoseconds(int64_t(us * 1e3));
  while (clock_type::now() < until) {
  }
}

// One job's record: its length, the latest start of a part, and how many distinct threads ran
// its parts.
struct JobTimes {
  std::vector<double> job_us, last_start_us;
  int doubled = 0;  // jobs where a thread ran more than one part
};

thread_local int t_thread_id = -1;
std::atomic<int> g_next_thread_id{0};
int thread_id() {
  if (t_thread_id < 0) t_thread_id = g_next_thread_id.fetch_add(1);
  return t_thread_id;
}

// Runs `jobs` jobs through `run_job(parts, part_fn)` and records them.
template <class RunJob>
JobTimes measure(int parts, int jobs, double work_us, RunJob&& run_job) {
  JobTimes t;
  std::vector<double> starts(static_cast<size_t>(parts));
  std::vector<int> ran_by(static_cast<size_t>(parts));
  for (int j = 0; j < jobs + jobs / 10; ++j) {  // the first tenth warms up, not recorded
    const auto t0 = clock_type::now();
    run_job(parts, [&](int64_t part) {
      starts[size_t(part)] = us_between(t0, clock_type::now());
      ran_by[size_t(part)] = thread_id();
      busy_for(work_us);
    });
    const double us = us_between(t0, clock_type::now());
    if (j < jobs / 10) continue;
    t.job_us.push_back(us);
    t.last_start_us.push_back(*std::max_element(starts.begin(), starts.end()));
    std::sort(ran_by.begin(), ran_by.end());
    if (std::unique(ran_by.begin(), ran_by.end()) != ran_by.end()) ++t.doubled;
  }
  return t;
}

void report(const char* name, double work_us, const JobTimes& t) {
  std::vector<double> over(t.job_us);
  for (double& x : over) x -= work_us;
  const auto o = kiln::bench::spread_of(over), s = kiln::bench::spread_of(t.last_start_us);
  std::vector<double> sorted(over);
  std::sort(sorted.begin(), sorted.end());
  const double p90 = sorted[size_t(double(sorted.size() - 1) * 0.9)];
  std::printf("| %6.0f | %-7s | %8.1f (%.1f-%.1f) | %8.1f | %8.1f (%.1f-%.1f) | %5.1f%% |\n",
              work_us, name, o.median, o.low, o.high, p90, s.median, s.low, s.high,
              100.0 * t.doubled / double(t.job_us.size()));
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  const std::string pin = kiln::bench::pin_process(opt.threads);
  std::printf("machine: %s\n", kiln::bench::machine_line().c_str());
  std::printf("threads: %d (%s); %d jobs back to back per row, one part per thread\n", opt.threads,
              pin.c_str(), opt.jobs);
  std::printf(
      "\n| part us | pool | job - part, us: median (quartiles) | p90 | last part's start, us "
      "| jobs with a thread on two parts |\n|---|---|---|---|---|---|\n");
  kiln::ThreadPool pool(opt.threads);
  omp_set_num_threads(opt.threads);
  for (double w : opt.work_us) {
    const JobTimes k = measure(opt.threads, opt.jobs, w, [&](int parts, const auto& part) {
      pool.parallel_for(parts, 1, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) part(i);
      });
    });
    report("kiln", w, k);
    const JobTimes m = measure(opt.threads, opt.jobs, w, [&](int parts, const auto& part) {
#pragma omp parallel for schedule(static, 1)
      for (int i = 0; i < parts; ++i) part(i);
    });
    report("openmp", w, m);
  }
  return 0;
}
