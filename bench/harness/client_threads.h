// client_threads: a closed loop of operations on client threads, one
// connection each, connected and ready before the clock starts.
//
// Contract:
//   - run_client_threads() starts one thread per client. In its thread,
//     `prepare(client, thread)` builds that thread's operation (collection
//     handles, its random generator ...) before the clock starts; then every
//     thread calls its operation until it returns false (no more work) or,
//     when `seconds` is given, until that many seconds have passed since the
//     start (the operation that is running then finishes).
//   - An operation records into its thread's Tally: the latency of what it
//     timed, the units of work done, and its failures; record() counts one
//     unit of work that took `ms` when `ok`, else one failure with `error`.
//     The run returns the tallies merged, the wall seconds from the start
//     to the last thread's end, the CPU spent meanwhile and the 1-minute
//     load average at the end.
//   - A mongoc_client_t is single-threaded: each thread uses only its own.
#pragma once

#include "bench_mongoc.h"
#include "cpu_probe.h"
#include "failures.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace bench_common {

struct Tally {
  std::vector<double> ms;
  int64_t done = 0;
  Failures failures;

  void record(bool ok, double latency_ms, const char* error) {
    if (ok) {
      ++done;
      ms.push_back(latency_ms);
    } else {
      failures.add(error);
    }
  }
  void merge(Tally&& other);
};

using Operation = std::function<bool(Tally&)>;
using PrepareOperation = std::function<Operation(mongoc_client_t* client, int thread)>;

struct ThreadsRun {
  Tally tally;
  double seconds = 0;
  CpuSeconds cpu;
  double load = 0;
};

ThreadsRun run_client_threads(const std::vector<ClientPtr>& clients, const CpuProbe& cpu,
                              std::optional<double> seconds, const PrepareOperation& prepare);

}  // namespace bench_common
