// read_rounds: a pattern bench's reads, the pattern's read through remold
// against the same read directly and against the application's own reads
// without the pattern, timed in rounds per cell, and the table and
// "BENCH_JSON {...}" rows of the cells. The bench states only its cells
// (their data, its read, its checks) and the words of its table.
//
// Contract:
//   - The three read sides are ReadSide: kReadRemold (the pattern's read
//     through remold), kReadDirect (the same read on the backend directly)
//     and kReadApp (the application's reads without the pattern, directly).
//     connect_read_sides() gives one connection per side, by ReadSide.
//   - A ReadSchedule is how a cell's reads run; it starts with the pattern
//     benches' defaults: at least 100 rounds and 3 s, at most 5,000 rounds,
//     a cell of slow reads stopped after 20 s once it has 10 rounds; 20
//     untimed reads per side. set_read_option() takes its flags
//     (--read-seconds S, 0 allowed; --min-reads N and --max-reads N,
//     1..10,000,000; --max-read-seconds S; --read-warmup N, 0..100,000) and
//     returns false for any other; read_schedule_usage() is their usage
//     lines, with the defaults of `defaults`; check_read_schedule() is a
//     usage error when --max-reads is below --min-reads.
//   - time_read_cell() runs the schedule's warm-up rounds, untimed (round
//     w: warm(side, w) for every side in order), then rounds of one timed
//     read per side while its limits allow (run_rounds(), timed_rounds.h;
//     start_round() before each); it fills the
//     cell's `timed` (by ReadSide) and `load1`. The bench's read accounts
//     for its own failures in the cell.
//   - A cell is ok when no read failed and its check passed (an empty
//     verify_message); check_text() is "verified", else "FAILED: " with the
//     check's message and the failed reads.
//   - print_read_progress() prints the line of one timed cell: "LABEL: N
//     rounds, p50 NAME ms, ..." with its label and ReadTable::progress_names,
//     and what failed.
//   - run_read_cells() runs cells 0..count-1 (run_cell(i)) in order, prints
//     each one's progress line, then the table; true when every cell is ok.
//   - print_read_table() prints the title, a header and one row per cell:
//     the cell's key columns (as the bench wrote them), every side's p50/p99
//     ms, the ratio columns, the backend's CPU per read of the direct side /
//     the application's side (? when the pid was not given), the rounds and
//     the check; then the legend and one BENCH_JSON line per cell: "bench"
//     (ReadTable::json_name), the cell's key fields, one object per side
//     (p50_ms, p99_ms, n, cpu_us {remold, backend}), the ratio fields (null
//     unless both percentiles are > 0), errors, ok, load1, cores.
//   - side_json() is that object of one side's samples (for any table of
//     run_rounds() sides).
#pragma once

#include "failures.h"
#include "pattern_harness.h"
#include "timed_rounds.h"

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace bench_common {

enum ReadSide { kReadRemold = 0, kReadDirect = 1, kReadApp = 2 };
constexpr int kReadSides = 3;

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

// The timed reads of one cell and what went wrong in it.
struct ReadCell {
  std::string label;                                         // "  read cell 100 comments/post"
  std::vector<std::string> key_text;                         // the key columns, as printed
  std::vector<std::pair<std::string, std::string>> key_json;  // key -> JSON text, after "bench"
  std::vector<SideSamples> timed;                            // by ReadSide
  Failures failures;
  std::string verify_message;  // empty: verified
  double load1 = 0;

  bool ok() const { return failures.count == 0 && verify_message.empty(); }
  std::string check_text() const;
};

void time_read_cell(ReadCell& cell, const ReadSchedule& schedule, const CpuProbe& cpu,
                    const std::function<void(int side, int w)>& warm, const std::function<void()>& start_round,
                    const std::function<std::optional<double>(int side)>& timed_read);

// One side's percentile over another's.
enum class ReadRatio { app_over_remold, app_over_direct, remold_over_direct };

struct TableColumn {
  const char* header;
  int width;
};

// A ratio column: p50 only, or "p50 p99".
struct RatioColumn {
  TableColumn column;
  ReadRatio ratio;
  bool with_p99;
};

// A ratio field of the JSON rows.
struct RatioField {
  const char* key;
  ReadRatio ratio;
  bool p99;  // false: p50
};

// The words of one bench's read table.
struct ReadTable {
  const char* json_name;                        // "computed_read": the BENCH_JSON rows' "bench"
  const char* title;                            // the lines above the table, each ending in '\n'
  std::vector<TableColumn> key_columns;         // the cell's own columns, first
  const char* side_headers[kReadSides];         // "findOne remold ms"
  const char* side_json[kReadSides];            // "find_remold"
  const char* progress_names[kReadSides];       // "findOne remold" (print_read_progress)
  std::vector<RatioColumn> ratio_columns;
  TableColumn backend_cpu;                      // "be cpu us F/A": direct / application
  std::vector<RatioField> ratio_fields;
  std::string legend;                           // the lines below the table, each "  ...\n"
};

std::string side_json(const SideSamples& samples);

void print_read_progress(const ReadCell& cell, const ReadTable& table);

void print_read_table(const std::vector<ReadCell>& cells, const ReadTable& table);

bool run_read_cells(size_t count, const ReadTable& table, const std::function<ReadCell(size_t cell)>& run_cell);

}  // namespace bench_common
