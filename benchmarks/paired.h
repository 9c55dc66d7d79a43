// Paired rounds: several implementations of the same work timed in alternation, a short burst
// each per round, so that every ratio compares runs taken within a fraction of a second of each
// other. On a shared, noisy machine the throughput of a core moves by 1.5x from one second to the
// next; sequential repetitions (all of A, then all of B) turn that into ratio error, paired rounds
// mostly cancel it. The order rotates from round to round so no implementation always runs first.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace kiln::bench {

struct Contender {
  std::string name;
  std::function<void()> run;
  // Sleep after each of its bursts: for a library whose idle threads spin for a while after a
  // call (OpenBLAS: about 2^28 TSC ticks), so that they do not take the cores of the next one.
  double settle_s = 0;
};

// Seconds per call of each contender in each round: seconds[contender][round].
struct PairedTimes {
  std::vector<std::string> names;
  std::vector<std::vector<double>> seconds;

  int index(const std::string& name) const {
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] == name) return int(i);
    return -1;
  }
};

struct Spread {
  double median = NAN, low = NAN, high = NAN;  // low/high: the quartiles
};

inline Spread spread_of(std::vector<double> v) {
  Spread s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    const double pos = q * double(v.size() - 1);
    const size_t lo = size_t(pos);
    const size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (pos - double(lo));
  };
  s.median = at(0.5);
  s.low = at(0.25);
  s.high = at(0.75);
  return s;
}

// Runs every contender once (warm-up), sizes a burst of about `burst_s` seconds per contender,
// then `rounds` rounds of one burst each, each burst after one untimed call.
inline PairedTimes run_paired(const std::vector<Contender>& cs, int rounds, double burst_s) {
  using clock = std::chrono::steady_clock;
  auto seconds_since = [](clock::time_point t0) {
    return std::chrono::duration<double>(clock::now() - t0).count();
  };
  PairedTimes out;
  std::vector<long> calls(cs.size(), 1);
  for (size_t i = 0; i < cs.size(); ++i) {
    out.names.push_back(cs[i].name);
    cs[i].run();
    const auto t0 = clock::now();
    long n = 0;
    double el = 0;
    do {
      cs[i].run();
      ++n;
      el = seconds_since(t0);
    } while (el < burst_s / 4);
    calls[i] = std::max(1L, long(double(n) * burst_s / el));
  }
  out.seconds.assign(cs.size(), std::vector<double>(size_t(rounds)));
  for (int r = 0; r < rounds; ++r) {
    for (size_t k = 0; k < cs.size(); ++k) {
      const size_t i = (k + size_t(r)) % cs.size();
      cs[i].run();  // untimed: caches and clock speed back after the previous contender
      const auto t0 = clock::now();
      for (long c = 0; c < calls[i]; ++c) cs[i].run();
      out.seconds[i][size_t(r)] = seconds_since(t0) / double(calls[i]);
      if (cs[i].settle_s > 0)
        std::this_thread::sleep_for(std::chrono::duration<double>(cs[i].settle_s));
    }
  }
  return out;
}

// Per round: time of the fastest of `others` / time of `who` (> 1: `who` is faster).
inline Spread paired_speedup(const PairedTimes& t, const std::string& who,
                             const std::vector<std::string>& others) {
  const int w = t.index(who);
  std::vector<int> o;
  for (const auto& name : others)
    if (int i = t.index(name); i >= 0) o.push_back(i);
  if (w < 0 || o.empty()) return {};
  std::vector<double> ratios;
  for (size_t r = 0; r < t.seconds[size_t(w)].size(); ++r) {
    double best = INFINITY;
    for (int i : o) best = std::min(best, t.seconds[size_t(i)][r]);
    ratios.push_back(best / t.seconds[size_t(w)][r]);
  }
  return spread_of(ratios);
}

inline Spread seconds_of(const PairedTimes& t, const std::string& who) {
  const int w = t.index(who);
  return w < 0 ? Spread{} : spread_of(t.seconds[size_t(w)]);
}

}  // namespace kiln::bench
