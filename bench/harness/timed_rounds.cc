// Turns and timed rounds of the compared sides: see timed_rounds.h.
#include "timed_rounds.h"

#include "bench_common.h"

#include <algorithm>

namespace bench_common {

std::vector<size_t> abba_round(const std::vector<std::vector<size_t>>& groups, int round) {
  std::vector<size_t> order;
  for (size_t g = 0; g < groups.size(); ++g) {
    if ((g + static_cast<size_t>(round)) % 2 == 0) order.insert(order.end(), groups[g].begin(), groups[g].end());
    else order.insert(order.end(), groups[g].rbegin(), groups[g].rend());
  }
  return order;
}

std::vector<std::vector<int>> rotating_orders(std::vector<int> sides) {
  std::vector<std::vector<int>> orders;
  std::sort(sides.begin(), sides.end());
  do orders.push_back(sides);
  while (std::next_permutation(sides.begin(), sides.end()));
  // Interleave so consecutive rounds differ in their first side.
  if (sides.size() > 1)
    std::stable_sort(orders.begin(), orders.end(),
                     [](const auto& a, const auto& b) { return a[1] < b[1]; });
  return orders;
}

double SideSamples::p50() const { return ms.empty() ? -1 : percentile(ms, 0.5); }
double SideSamples::p99() const { return ms.empty() ? -1 : percentile(ms, 0.99); }

std::vector<SideSamples> run_rounds(const RoundLimits& limits, const std::vector<int>& sides,
                                    const CpuProbe& cpu, const std::function<void()>& start_round,
                                    const std::function<std::optional<double>(int side)>& op) {
  const int count = sides.empty() ? 0 : *std::max_element(sides.begin(), sides.end()) + 1;
  std::vector<SideSamples> samples(count);
  std::vector<CpuSeconds> used(count, CpuSeconds{0, 0, 0});
  bool knows_remold = cpu.knows_remold(), knows_backend = cpu.knows_backend();
  const auto orders = rotating_orders(sides);
  const auto start = Clock::now();
  for (int round = 0; round < limits.max_rounds; ++round) {
    const double elapsed = seconds_since(start);
    if (round >= limits.min_rounds && elapsed >= limits.seconds) break;
    if (round >= limits.rounds_before_cutoff && elapsed >= limits.max_seconds) break;
    start_round();
    for (int side : orders[static_cast<size_t>(round) % orders.size()]) {
      const CpuSeconds before = cpu.now();
      const std::optional<double> ms = op(side);
      const CpuSeconds delta = spent(before, cpu.now());
      knows_remold = knows_remold && delta.remold >= 0;
      knows_backend = knows_backend && delta.backend >= 0;
      used[side].remold += delta.remold;
      used[side].backend += delta.backend;
      if (ms) samples[side].ms.push_back(*ms);
    }
  }
  for (int side : sides) {
    const double n = static_cast<double>(std::max<size_t>(1, samples[side].ms.size()));
    if (knows_remold) samples[side].remold_cpu_s = used[side].remold / n;
    if (knows_backend) samples[side].backend_cpu_s = used[side].backend / n;
  }
  return samples;
}

}  // namespace bench_common
