// Write cases in rounds, remold against direct, and their table: see
// write_rounds.h.
#include "write_rounds.h"

#include "bench_common.h"
#include "bench_report.h"
#include "timed_rounds.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace bench_common {

namespace {

constexpr int kRemold = static_cast<int>(WriteSide::remold);
constexpr int kDirect = static_cast<int>(WriteSide::direct);
const std::vector<const char*> kSideNames = {"remold", "direct"};  // by WriteSide

// One table row: the cases of one client count, summed per side.
struct WriteRow {
  std::vector<double> ms[2], rates[2];
  int64_t ops[2] = {0, 0};
  uint64_t errors = 0;
  double cpu_remold[2] = {0, 0}, cpu_backend[2] = {0, 0};
  bool remold_known = true, backend_known = true;
  std::string check;

  void add(const WriteCase& c) {
    const int side = c.side;
    ms[side].insert(ms[side].end(), c.run.tally.ms.begin(), c.run.tally.ms.end());
    rates[side].push_back(c.rate());
    ops[side] += c.ops();
    errors += c.run.tally.failures.count;
    remold_known = remold_known && c.run.cpu.remold >= 0;
    backend_known = backend_known && c.run.cpu.backend >= 0;
    cpu_remold[side] += c.run.cpu.remold;
    cpu_backend[side] += c.run.cpu.backend;
    if (!c.ok() && check.empty())
      check = std::string("FAILED ") + kSideNames[static_cast<size_t>(side)] + " round " +
              std::to_string(c.round) + ": " + c.failure();
  }
  // CPU seconds per operation of one side, -1 when unknown.
  double per_op(double cpu, bool known, int side) const {
    return known && ops[side] > 0 ? cpu / static_cast<double>(ops[side]) : -1;
  }
};

}  // namespace

bool set_write_option(WriteSchedule& schedule, const std::string& flag, const std::string& value) {
  if (flag == "--clients") schedule.clients = parse_count_list(flag, value, 256);
  else if (flag == "--seconds") schedule.seconds = parse_number(flag, value);
  else if (flag == "--rounds") schedule.rounds = static_cast<int>(parse_int(flag, value, 1, 1000));
  else if (flag == "--warmup") schedule.warmup = parse_number(flag, value, true);
  else return false;
  return true;
}

std::string write_schedule_usage(const WriteSchedule& defaults) {
  const std::string clients = clients_text(defaults.clients);
  return usage_lines("--clients " + clients, {"client threads of the insert cases (default " + clients + ")"}) +
         usage_lines("--seconds S",
                     {"timed seconds per insert case and round (default " + default_text(defaults.seconds) + ")"}) +
         usage_lines("--rounds N", {"insert rounds; remold and direct run back to back, which",
                                    "goes first alternating; the table shows the median (default " +
                                        std::to_string(defaults.rounds) + ")"}) +
         usage_lines("--warmup S",
                     {"untimed seconds of inserts per side first (default " + default_text(defaults.warmup) + ")"});
}

std::string clients_text(const std::vector<int>& clients) {
  std::string text;
  for (int c : clients) text += (text.empty() ? "" : ",") + std::to_string(c);
  return text;
}

uint64_t thread_seed(int round, int side, int clients, int thread) {
  return static_cast<uint64_t>(round) * 1000003u + static_cast<uint64_t>(side) * 1009u +
         static_cast<uint64_t>(clients) * 31u + static_cast<uint64_t>(thread);
}

std::string WriteCase::failure() const {
  const Failures& failures = run.tally.failures;
  return (failures.count ? failures.text("inserts") + "; " : "") + verify_message;
}

WriteRounds run_write_cases(const WriteSchedule& schedule, const std::vector<const char*>& side_names,
                            const char* units, const RunWriteCase& run_case) {
  WriteRounds result;
  const size_t sides = side_names.size();
  int name_width = 0;
  for (const char* name : side_names) name_width = std::max(name_width, static_cast<int>(std::strlen(name)));
  if (schedule.warmup > 0) {
    int64_t n = 0;
    for (size_t side = 0; side < sides; ++side) {
      WriteCase w = run_case(static_cast<int>(side), 1, -1, schedule.warmup);
      n += w.ops();
      if (!w.ok()) {
        std::printf("warm-up on %s FAILED: %s\n", side_names[side], w.failure().c_str());
        result.ok = false;
      }
    }
    std::printf("warm-up: %lld untimed inserts\n", static_cast<long long>(n));
  }
  // Per client count, its sides back to back; case k: clients[k / sides], side k % sides.
  std::vector<std::vector<size_t>> groups;
  for (size_t k = 0; k < schedule.clients.size(); ++k) {
    groups.emplace_back();
    for (size_t side = 0; side < sides; ++side) groups.back().push_back(sides * k + side);
  }
  for (int round = 0; round < schedule.rounds; ++round) {
    for (const size_t k : abba_round(groups, round)) {
      const int side = static_cast<int>(k % sides), clients = schedule.clients[k / sides];
      result.cases.push_back(run_case(side, clients, round, schedule.seconds));
      const WriteCase& c = result.cases.back();
      std::printf("  round %d, %d clients, %-*s: %lld %s in %.2f s = %.0f/s, p50 %.2f ms%s%s\n", round, clients,
                  name_width, side_names[static_cast<size_t>(side)], static_cast<long long>(c.ops()), units,
                  c.run.seconds, c.rate(), percentile(c.run.tally.ms, 0.5), c.ok() ? "" : "; FAILED: ",
                  c.ok() ? "" : c.failure().c_str());
      std::fflush(stdout);
      result.ok = result.ok && c.ok();
    }
  }
  return result;
}

bool run_write_rounds(const WriteSchedule& schedule, const WriteTable& table,
                      const std::function<WriteCase(WriteSide side, int clients, int round, double seconds)>& run_case) {
  const WriteRounds rounds = run_write_cases(
      schedule, kSideNames, table.units,
      [&](int side, int clients, int round, double seconds) {
        return run_case(static_cast<WriteSide>(side), clients, round, seconds);
      });
  print_write_table(rounds.cases, schedule.clients, table);
  return rounds.ok;
}

void print_write_table(const std::vector<WriteCase>& cases, const std::vector<int>& clients_list,
                       const WriteTable& table) {
  std::printf("\n%s", table.title);
  std::printf("%7s %12s %12s %6s %13s %18s %18s %12s %14s %16s %9s %s\n", "clients", "remold op/s",
              "direct op/s", "ratio", "round range", "remold p50/p99 ms", "direct p50/p99 ms", "p50 p99 R/D",
              "rm cpu us/op", "be cpu us/op R/D", "ops R/D", "check");
  std::vector<JsonObject> json_rows;
  for (int clients : clients_list) {
    WriteRow row;
    bool sides[2] = {false, false};
    for (int side : {kRemold, kDirect})
      for (const WriteCase& c : cases)
        if (c.clients == clients && c.side == side) {
          row.add(c);
          sides[side] = true;
        }
    if (!sides[kRemold] || !sides[kDirect]) continue;
    const std::string check = row.check.empty() ? "verified" : row.check;
    const auto& rates = row.rates;
    const auto range = ratio_range(rates[kRemold], rates[kDirect]);
    const double rate_r = median(rates[kRemold]), rate_d = median(rates[kDirect]);
    char range_text[32] = "-";
    if (range) std::snprintf(range_text, sizeof range_text, "%.2f-%.2f", range->first, range->second);
    const double rm = row.per_op(row.cpu_remold[kRemold], row.remold_known, kRemold);
    const double be_r = row.per_op(row.cpu_backend[kRemold], row.backend_known, kRemold);
    const double be_d = row.per_op(row.cpu_backend[kDirect], row.backend_known, kDirect);
    const double p50[2] = {percentile(row.ms[0], 0.5), percentile(row.ms[1], 0.5)};
    const double p99[2] = {percentile(row.ms[0], 0.99), percentile(row.ms[1], 0.99)};
    const std::string lat_ratio = ratio_text(p50[0], p50[1]) + " " + ratio_text(p99[0], p99[1]);
    const std::string be = cpu_us(be_r) + "/" + cpu_us(be_d);
    const std::string nops = std::to_string(row.ops[kRemold]) + "/" + std::to_string(row.ops[kDirect]);
    std::printf("%7d %12.0f %12.0f %6.2f %13s %18s %18s %12s %14s %16s %9s %s\n", clients, rate_r, rate_d,
                rate_d > 0 ? rate_r / rate_d : 0, range_text, ms_pair(row.ms[kRemold]).c_str(),
                ms_pair(row.ms[kDirect]).c_str(), lat_ratio.c_str(), cpu_us(rm).c_str(), be.c_str(), nops.c_str(),
                check.c_str());
    std::string rounds = "[";
    for (size_t i = 0; i < rates[kRemold].size() && i < rates[kDirect].size(); ++i)
      rounds += (i ? "," : "") + JsonObject()
                                     .raw("remold", number_or_null(rates[kRemold][i], "%.1f"))
                                     .raw("direct", number_or_null(rates[kDirect][i], "%.1f"))
                                     .str();
    rounds += "]";
    json_rows.push_back(JsonObject()
        .add("bench", table.json_name).add("clients", clients)
        .raw("remold_ops_per_s", number_or_null(rate_r, "%.1f"))
        .raw("direct_ops_per_s", number_or_null(rate_d, "%.1f"))
        .raw("ratio", number_or_null(rate_d > 0 ? rate_r / rate_d : -1))
        .raw("round_ratio_min", number_or_null(range ? range->first : -1))
        .raw("round_ratio_max", number_or_null(range ? range->second : -1))
        .raw("remold_p50_ms", number_or_null(p50[0])).raw("remold_p99_ms", number_or_null(p99[0]))
        .raw("direct_p50_ms", number_or_null(p50[1])).raw("direct_p99_ms", number_or_null(p99[1]))
        .raw("rounds", rounds)
        .raw("cpu_us_per_op",
             JsonObject()
                 .raw("remold_side", JsonObject()
                                         .raw("remold", number_or_null(us_of(rm)))
                                         .raw("backend", number_or_null(us_of(be_r)))
                                         .str())
                 .raw("direct_side", JsonObject().raw("backend", number_or_null(us_of(be_d))).str())
                 .str())
        .raw("ops", JsonObject().add("remold", row.ops[kRemold]).add("direct", row.ops[kDirect]).str())
        .add("errors", row.errors).add("ok", check == "verified").add("check", check)
        .add("cores", usable_cores()));
  }
  std::printf(
      "\n  op/s = %s per second (median of the rounds), both writes done for direct;\n"
      "  ratio = remold / direct (above 1: remold is faster), round range = that ratio in single\n"
      "  rounds (wide: noisy machine). p50/p99 ms = latency of one %s, every round's samples\n"
      "  together; p50 p99 R/D = remold's percentile / direct's (below 1: remold is faster).\n"
      "  rm cpu / be cpu = CPU microseconds of remold / the backend per %s (? = pid not given).\n"
      "%s",
      table.units, table.unit, table.unit, table.check_legend);
  for (const auto& row : json_rows) print_bench_json(row);
  std::fflush(stdout);
}

}  // namespace bench_common
