// Closed-loop client threads: see client_threads.h.
#include "client_threads.h"

#include "bench_common.h"

#include <latch>
#include <thread>

namespace bench_common {

void Tally::merge(Tally&& other) {
  ms.insert(ms.end(), other.ms.begin(), other.ms.end());
  done += other.done;
  failures.merge(other.failures);
}

ThreadsRun run_client_threads(const std::vector<ClientPtr>& clients, const CpuProbe& cpu,
                              std::optional<double> seconds, const PrepareOperation& prepare) {
  const int count = static_cast<int>(clients.size());
  std::vector<Tally> tallies(count);
  std::latch ready(count + 1);
  std::latch go(1);
  Clock::time_point deadline = Clock::time_point::max();
  std::vector<std::thread> threads;
  for (int t = 0; t < count; ++t) {
    threads.emplace_back([&, t] {
      Operation operation = prepare(clients[t].get(), t);
      ready.count_down();
      go.wait();
      while (Clock::now() < deadline && operation(tallies[t])) {
      }
    });
  }
  ready.arrive_and_wait();
  ThreadsRun run;
  const CpuSeconds before = cpu.now();
  const auto start = Clock::now();
  if (seconds)
    deadline = start + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(*seconds));
  go.count_down();
  for (auto& thread : threads) thread.join();
  run.seconds = seconds_since(start);
  run.cpu = spent(before, cpu.now());
  run.load = load_average();
  for (auto& tally : tallies) run.tally.merge(std::move(tally));
  return run;
}

}  // namespace bench_common
