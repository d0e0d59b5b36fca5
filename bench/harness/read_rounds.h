// read_rounds: how a pattern bench's read cells run: one connection per
// read side (read_table.h), the schedule of a cell and its flags, the
// warm-up and the timed rounds of one read per side, and a bench's cells in
// order with their progress lines and table. The bench states only its
// cells (their data, its read, its checks) and the words of its table.
//
// Contract:
//   - connect_read_sides() gives one connection per side, by ReadSide: to
//     remold for kReadRemold, to the backend for the others.
//   - A ReadSchedule starts with the pattern benches' defaults: at least
//     100 rounds and 3 s, at most 5,000 rounds, a cell of slow reads
//     stopped after 20 s once it has 10 rounds; 20 untimed reads per side.
//     set_read_option() takes its flags (--read-seconds S, 0 allowed;
//     --min-reads N and --max-reads N, 1..10,000,000; --max-read-seconds S;
//     --read-warmup N, 0..100,000) and returns false for any other;
//     read_schedule_usage() is their usage lines, with the defaults of
//     `defaults`; check_read_schedule() is a usage error when --max-reads is
//     below --min-reads.
//   - time_read_cell() runs the schedule's warm-up rounds, untimed (round
//     w: warm(side, w) for every side in order), then rounds of one timed
//     read per side while its limits allow (run_rounds(), timed_rounds.h;
//     start_round() before each); it fills the cell's `timed` (by ReadSide)
//     and `load1`. The bench's read accounts for its own failures in the
//     cell.
//   - run_read_cells() runs cells 0..count-1 (run_cell(i)) in order, prints
//     each one's progress line, then the table; true when every cell is ok.
#pragma once

#include "pattern_harness.h"
#include "read_table.h"
#include "timed_rounds.h"

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace bench_common {

std::vector<ClientPtr> connect_read_sides(const Harness& harness);

struct ReadSchedule {
  // The timed rounds of a cell.
  RoundLimits limits{.min_rounds = 100, .max_rounds = 5000, .seconds = 3, .max_seconds = 20,
                     .rounds_before_cutoff = 10};
  int warmup = 20;  // untimed reads per side per cell
};

bool set_read_option(ReadSchedule& schedule, const std::string& flag, const std::string& value);
std::string read_schedule_usage(const ReadSchedule& defaults);
void check_read_schedule(const ReadSchedule& schedule);

void time_read_cell(ReadCell& cell, const ReadSchedule& schedule, const CpuProbe& cpu,
                    const std::function<void(int side, int w)>& warm, const std::function<void()>& start_round,
                    const std::function<std::optional<double>(int side)>& timed_read);

bool run_read_cells(size_t count, const ReadTable& table, const std::function<ReadCell(size_t cell)>& run_cell);

}  // namespace bench_common
