// cpu_probe: the CPU time the bench client, remold and the backend spend
// between two moments, so a bench can say where the time went.
//
// Contract:
//   - CpuProbe::now() reads user + system CPU seconds (all threads) of this
//     process, of remold and of the backend; a process the bench was not
//     given (pid 0) or cannot read reads -1.
//   - spent(before, after) is the difference per process, -1 where either
//     moment is unknown.
#pragma once

namespace bench_common {

struct CpuSeconds {
  double client = -1;
  double remold = -1;
  double backend = -1;
};

class CpuProbe {
 public:
  CpuProbe(int remold_pid, int backend_pid) : remold_pid_(remold_pid), backend_pid_(backend_pid) {}

  CpuSeconds now() const;
  bool knows_remold() const { return remold_pid_ > 0; }
  bool knows_backend() const { return backend_pid_ > 0; }

 private:
  int remold_pid_;
  int backend_pid_;
};

CpuSeconds spent(const CpuSeconds& before, const CpuSeconds& after);

}  // namespace bench_common
