// Throughput and percentiles from latency samples: see latency.h.
#include "latency.h"

#include "bench_common.h"

#include <algorithm>

namespace remold_bench {
namespace {

// Nearest-rank percentile of sorted samples, in microseconds.
double percentile_us(const std::vector<uint32_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  return sorted[bench_common::nearest_rank(sorted.size(), p)] / 1000.0;
}

}  // namespace

Summary summarize(Samples& samples) {
  std::sort(samples.latencies_ns.begin(), samples.latencies_ns.end());
  Summary s;
  s.ops = samples.latencies_ns.size();
  s.ops_per_s = samples.seconds > 0 ? static_cast<double>(s.ops) / samples.seconds : 0;
  s.p50_us = percentile_us(samples.latencies_ns, 0.50);
  s.p99_us = percentile_us(samples.latencies_ns, 0.99);
  s.errors = samples.errors;
  return s;
}

}  // namespace remold_bench
