// read_table: the rows and the table of a pattern bench's reads: the
// pattern's read through remold against the same read directly and against
// the application's own reads without the pattern, one row per cell, with
// its "BENCH_JSON {...}" rows. The bench gives the words (ReadTable) and
// each row's key; read_rounds.h fills the rows.
//
// Contract:
//   - The three read sides are ReadSide: kReadRemold (the pattern's read
//     through remold), kReadDirect (the same read on the backend directly)
//     and kReadApp (the application's reads without the pattern, directly).
//   - A ReadCell is one row: its progress label, its key (the columns as
//     the bench wrote them, and the JSON fields after "bench"), every side's
//     timed samples (by ReadSide), its failed reads and its check. It is ok
//     when no read failed and its check passed (an empty verify_message);
//     check_text() is "verified", else "FAILED: " with the check's message
//     and the failed reads.
//   - print_read_progress() prints the line of one timed cell: "LABEL: N
//     rounds, p50 NAME ms, ..." with ReadTable::progress_names, and what
//     failed.
//   - print_read_table() prints the title, a header and one row per cell:
//     the cell's key columns, every side's p50/p99 ms, the ratio columns,
//     the backend's CPU per read of the direct side / the application's side
//     (? when the pid was not given), the rounds and the check; then the
//     legend and one BENCH_JSON line per cell: "bench" (ReadTable::json_name),
//     the cell's key fields, one object per side (p50_ms, p99_ms, n, cpu_us
//     {remold, backend}), the ratio fields (null unless both percentiles are
//     > 0), errors, ok, load1, cores.
//   - side_json() is that object of one side's samples (for any table of
//     run_rounds() sides).
#pragma once

#include "failures.h"
#include "timed_rounds.h"

#include <string>
#include <utility>
#include <vector>

namespace bench_common {

enum ReadSide { kReadRemold = 0, kReadDirect = 1, kReadApp = 2 };
constexpr int kReadSides = 3;

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
  const char* json_name;                   // "computed_read": the BENCH_JSON rows' "bench"
  const char* title;                       // the lines above the table, each ending in '\n'
  std::vector<TableColumn> key_columns;    // the cell's own columns, first
  const char* side_headers[kReadSides];    // "findOne remold ms"
  const char* side_keys[kReadSides];       // "find_remold": the side's JSON object
  const char* progress_names[kReadSides];  // "findOne remold" (print_read_progress)
  std::vector<RatioColumn> ratio_columns;
  TableColumn backend_cpu;                 // "be cpu us F/A": direct / application
  std::vector<RatioField> ratio_fields;
  std::string legend;                      // the lines below the table, each "  ...\n"
};

std::string side_json(const SideSamples& samples);

void print_read_progress(const ReadCell& cell, const ReadTable& table);

void print_read_table(const std::vector<ReadCell>& cells, const ReadTable& table);

}  // namespace bench_common
