// write_rounds: a pattern bench's closed-loop writes, remold against the
// application's own writes sent directly, timed in rounds per client count,
// and their table and "BENCH_JSON {...}" rows. The bench states only how one
// case runs (its data, its operation, its check) and the words of its table.
//
// Contract:
//   - run_write_rounds() first runs one untimed case of `warmup` seconds per
//     side with 1 client (round -1; skipped when warmup is 0) and prints
//     "warm-up: N untimed inserts"; then `rounds` rounds, each of one case
//     per client count and side, remold and direct back to back in ABBA
//     order (abba_round()), of `seconds` each, printing one line per case;
//     then the table. It is true when every case, the warm-up's included,
//     ran without a failure and passed its check.
//   - A case (run_case) runs on a side made fresh for it and is verified
//     after it: WriteCase.run is its client threads' run (done = writes
//     acknowledged, ms = latency per unit), verify_message is empty when its
//     check passed.
//   - The table has one row per client count that has cases of both sides:
//     median op/s of the rounds per side, their ratio and its range over
//     single rounds, p50/p99 of every round's samples together, remold's
//     and the backend's CPU per operation (? when a pid was not given), the
//     ops per side, and "verified" or the first failed case. Then the legend
//     (its unit nouns and the bench's check lines) and one BENCH_JSON line
//     per row, named WriteTable.json_name.
#pragma once

#include "client_threads.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace bench_common {

enum class WriteSide { remold = 0, direct = 1 };
const char* write_side_name(WriteSide side);

struct WriteCase {
  WriteSide side = WriteSide::remold;
  int clients = 1;
  int round = 0;
  ThreadsRun run;
  std::string verify_message;  // empty: verified

  int64_t ops() const { return run.tally.done; }
  double rate() const { return run.seconds > 0 ? static_cast<double>(ops()) / run.seconds : 0; }
  bool ok() const { return run.tally.failures.count == 0 && verify_message.empty(); }
  std::string failure() const;
};

struct WriteSchedule {
  std::vector<int> clients;
  int rounds = 1;
  double seconds = 0;  // timed, per case
  double warmup = 0;   // untimed, per side, before the first round
};

// The words of one bench's write table.
struct WriteTable {
  const char* json_name;    // "computed_insert": the BENCH_JSON rows' "bench"
  const char* title;        // the lines above the table, each ending in '\n'
  const char* unit;         // "comment": what one operation writes
  const char* units;        // "comments"
  const char* check_legend; // the legend's lines on the check, each "  ...\n"
};

using RunWriteCase = std::function<WriteCase(WriteSide side, int clients, int round, double seconds)>;

bool run_write_rounds(const WriteSchedule& schedule, const WriteTable& table, const RunWriteCase& run_case);

void print_write_table(const std::vector<WriteCase>& cases, const std::vector<int>& clients,
                       const WriteTable& table);

}  // namespace bench_common
