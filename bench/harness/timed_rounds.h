// timed_rounds: the order in which the compared sides of a bench take their
// turns, and timed rounds of one operation per side.
//
// Contract:
//   - abba_round(groups, round) is the order in which the cases of one round
//     run. A group lists cases that run back to back (remold, then what it
//     is compared with); it runs in its listed order when group + round is
//     even and reversed when odd, so from one group to the next and from one
//     round to the next the order swaps (A B, B A, B A, A B ...) and drift
//     hits every side alike.
//   - rotating_orders(sides) is every permutation of `sides`, arranged so
//     consecutive rounds start with different sides; round i of run_rounds()
//     uses order i % count, so each side runs first, second and last equally
//     often.
//   - run_rounds() runs rounds of one `op(side)` per side while `limits`
//     allow: it stops once it has min_rounds and `seconds` have passed, at
//     max_rounds, or once it has rounds_before_cutoff rounds and max_seconds
//     have passed (a cell of slow operations). `start_round` runs before each
//     round (e.g. to pick the round's document). `op` returns the latency in
//     ms of an operation that counts as a sample, std::nullopt for one that
//     does not (it failed; `op` keeps its own error account).
//   - The result is indexed by side: every sample, and remold's and the
//     backend's CPU seconds per sample around that side's operations (-1
//     when the process is unknown to `cpu`). p50() and p99() are
//     nearest-rank percentiles of the samples, -1 when there is none.
#pragma once

#include "cpu_probe.h"

#include <cstddef>
#include <functional>
#include <optional>
#include <vector>

namespace bench_common {

std::vector<size_t> abba_round(const std::vector<std::vector<size_t>>& groups, int round);

std::vector<std::vector<int>> rotating_orders(std::vector<int> sides);

struct RoundLimits {
  int min_rounds = 1;
  int max_rounds = 1;
  double seconds = 0;
  double max_seconds = 0;
  int rounds_before_cutoff = 0;
};

struct SideSamples {
  std::vector<double> ms;
  double remold_cpu_s = -1;   // per sample
  double backend_cpu_s = -1;  // per sample

  double p50() const;
  double p99() const;
};

std::vector<SideSamples> run_rounds(const RoundLimits& limits, const std::vector<int>& sides,
                                    const CpuProbe& cpu, const std::function<void()>& start_round,
                                    const std::function<std::optional<double>(int side)>& op);

}  // namespace bench_common
