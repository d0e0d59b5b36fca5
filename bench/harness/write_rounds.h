// write_rounds: a pattern bench's closed-loop writes, remold against the
// application's own writes sent directly (one way or more), timed in rounds
// per client count, and the table and "BENCH_JSON {...}" rows of remold
// against one direct side. The bench states only how one case runs (its
// data, its operation, its check) and the words of its table.
//
// Contract:
//   - run_write_cases() first runs one untimed case of `warmup` seconds per
//     side with 1 client (round -1; skipped when warmup is 0) and prints
//     "warm-up: N untimed inserts"; then `rounds` rounds, each of one case
//     per client count and side, the sides of a client count back to back
//     in the order abba_round() gives, of `seconds` each, printing one line
//     per case. Its `ok` is true when every case, the warm-up's included,
//     ran without a failure and passed its check.
//   - run_write_rounds() is run_write_cases() of two sides, remold then
//     direct (WriteCase::side is a WriteSide), followed by the table.
//   - A WriteSchedule starts with the pattern benches' defaults: clients
//     1,8; 3 rounds of 3 s; 2 s of warm-up. set_write_option() takes its
//     flags (--clients 1,8; --seconds S; --rounds N, 1..1000; --warmup S, 0
//     allowed) and returns false for any other; write_schedule_usage() is
//     their usage lines, with the defaults of `defaults`, for rounds of
//     two sides (remold and direct); clients_text() is "1,8".
//   - thread_seed() is the seed of one client thread's random generator in
//     a case, distinct per round, side, client count and thread.
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

struct WriteCase {
  WriteCase() = default;
  WriteCase(int side, int clients, int round) : side(side), clients(clients), round(round) {}

  int side = 0;  // index in the sides of its rounds
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
  std::vector<int> clients{1, 8};
  int rounds = 3;
  double seconds = 3;  // timed, per case
  double warmup = 2;   // untimed, per side, before the first round
};

// The words of one bench's write table.
struct WriteTable {
  const char* json_name;    // "computed_insert": the BENCH_JSON rows' "bench"
  const char* title;        // the lines above the table, each ending in '\n'
  const char* unit;         // "comment": what one operation writes
  const char* units;        // "comments"
  const char* check_legend; // the legend's lines on the check, each "  ...\n"
};

bool set_write_option(WriteSchedule& schedule, const std::string& flag, const std::string& value);
std::string write_schedule_usage(const WriteSchedule& defaults);
std::string clients_text(const std::vector<int>& clients);

using RunWriteCase = std::function<WriteCase(int side, int clients, int round, double seconds)>;

struct WriteRounds {
  std::vector<WriteCase> cases;  // the timed ones, in the order they ran
  bool ok = true;
};

WriteRounds run_write_cases(const WriteSchedule& schedule, const std::vector<const char*>& side_names,
                            const char* units, const RunWriteCase& run_case);

uint64_t thread_seed(int round, int side, int clients, int thread);

enum class WriteSide { remold = 0, direct = 1 };

bool run_write_rounds(const WriteSchedule& schedule, const WriteTable& table,
                      const std::function<WriteCase(WriteSide side, int clients, int round, double seconds)>& run_case);

void print_write_table(const std::vector<WriteCase>& cases, const std::vector<int>& clients,
                       const WriteTable& table);

}  // namespace bench_common
