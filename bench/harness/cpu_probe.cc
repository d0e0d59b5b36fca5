// CPU time of the bench's processes: see cpu_probe.h.
#include "cpu_probe.h"

#include "bench_common.h"

namespace bench_common {

CpuSeconds CpuProbe::now() const {
  return {self_cpu_seconds(), process_cpu_seconds(remold_pid_), process_cpu_seconds(backend_pid_)};
}

CpuSeconds spent(const CpuSeconds& before, const CpuSeconds& after) {
  auto delta = [](double a, double b) { return a >= 0 && b >= 0 ? b - a : -1; };
  return {delta(before.client, after.client), delta(before.remold, after.remold),
          delta(before.backend, after.backend)};
}

}  // namespace bench_common
