// Latency samples and their summary.
//
// Contract: a Samples holds per-operation latencies in nanoseconds (one
// entry per completed operation inside a measurement window) and the total
// length of those windows. summarize() turns it into throughput and
// nearest-rank percentiles; it sorts the samples in place.
#pragma once

#include <cstdint>
#include <vector>

namespace remold_bench {

struct Samples {
  std::vector<uint32_t> latencies_ns;
  double seconds = 0;  // summed measurement windows
  uint64_t errors = 0;
};

struct Summary {
  uint64_t ops = 0;
  double ops_per_s = 0;
  double p50_us = 0;
  double p99_us = 0;
  uint64_t errors = 0;
};

Summary summarize(Samples& samples);

}  // namespace remold_bench
