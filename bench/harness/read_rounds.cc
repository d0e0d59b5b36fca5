// A pattern bench's read cells in rounds: see read_rounds.h.
#include "read_rounds.h"

#include "bench_common.h"

namespace bench_common {

std::vector<ClientPtr> connect_read_sides(const Harness& harness) {
  std::vector<ClientPtr> clients;
  for (int side = 0; side < kReadSides; ++side)
    clients.push_back(harness.connect(side == kReadRemold ? Via::remold : Via::direct));
  return clients;
}

bool set_read_option(ReadSchedule& schedule, const std::string& flag, const std::string& value) {
  auto int_arg = [&](int lo, int hi) { return static_cast<int>(parse_int(flag, value, lo, hi)); };
  if (flag == "--read-seconds") schedule.limits.seconds = parse_number(flag, value, true);
  else if (flag == "--min-reads") schedule.limits.min_rounds = int_arg(1, 10'000'000);
  else if (flag == "--max-reads") schedule.limits.max_rounds = int_arg(1, 10'000'000);
  else if (flag == "--max-read-seconds") schedule.limits.max_seconds = parse_number(flag, value);
  else if (flag == "--read-warmup") schedule.warmup = int_arg(0, 100000);
  else return false;
  return true;
}

std::string read_schedule_usage(const ReadSchedule& defaults) {
  const RoundLimits& d = defaults.limits;
  return usage_lines("--read-seconds S",
                     {"timed seconds per read cell, at least (default " + default_text(d.seconds) + ")"}) +
         usage_lines("--min-reads N", {"timed rounds (one read per side) per read cell, at least",
                                       "(default " + std::to_string(d.min_rounds) + ")"}) +
         usage_lines("--max-reads N", {"and at most (default " + std::to_string(d.max_rounds) + ")"}) +
         usage_lines("--max-read-seconds S",
                     {"stop a cell of slow reads after S seconds, once it has " +
                          std::to_string(d.rounds_before_cutoff),
                      "rounds (default " + default_text(d.max_seconds) + ")"}) +
         usage_lines("--read-warmup N",
                     {"untimed reads per side per cell (default " + std::to_string(defaults.warmup) + ")"});
}

void check_read_schedule(const ReadSchedule& schedule) {
  if (schedule.limits.max_rounds < schedule.limits.min_rounds) usage_error("--max-reads is below --min-reads");
}

void time_read_cell(ReadCell& cell, const ReadSchedule& schedule, const CpuProbe& cpu,
                    const std::function<void(int side, int w)>& warm, const std::function<void()>& start_round,
                    const std::function<std::optional<double>(int side)>& timed_read) {
  for (int w = 0; w < schedule.warmup; ++w)
    for (int side = 0; side < kReadSides; ++side) warm(side, w);
  cell.timed = run_rounds(schedule.limits, {kReadRemold, kReadDirect, kReadApp}, cpu, start_round, timed_read);
  cell.load1 = load_average();
}

bool run_read_cells(size_t count, const ReadTable& table, const std::function<ReadCell(size_t cell)>& run_cell) {
  bool all_ok = true;
  std::vector<ReadCell> cells;
  for (size_t i = 0; i < count; ++i) {
    cells.push_back(run_cell(i));
    print_read_progress(cells.back(), table);
    all_ok = all_ok && cells.back().ok();
  }
  print_read_table(cells, table);
  return all_ok;
}

}  // namespace bench_common
