// Read cells in rounds, remold against direct and the application's own
// reads, and their table: see read_rounds.h.
#include "read_rounds.h"

#include "bench_common.h"
#include "bench_report.h"

#include <cstdio>

namespace bench_common {

namespace {

// The two sides of a ratio, numerator first.
std::pair<int, int> sides_of(ReadRatio ratio) {
  switch (ratio) {
    case ReadRatio::app_over_remold: return {kReadApp, kReadRemold};
    case ReadRatio::app_over_direct: return {kReadApp, kReadDirect};
    case ReadRatio::remold_over_direct: return {kReadRemold, kReadDirect};
  }
  return {kReadApp, kReadRemold};
}

std::string ratio_cell(const ReadCell& cell, const RatioColumn& column) {
  const auto [num, den] = sides_of(column.ratio);
  const SideSamples& a = cell.timed[static_cast<size_t>(num)];
  const SideSamples& b = cell.timed[static_cast<size_t>(den)];
  std::string text = ratio_text(a.p50(), b.p50());
  if (column.with_p99) text += " " + ratio_text(a.p99(), b.p99());
  return text;
}

std::string ratio_field(const ReadCell& cell, const RatioField& field) {
  const auto [num, den] = sides_of(field.ratio);
  const SideSamples& a = cell.timed[static_cast<size_t>(num)];
  const SideSamples& b = cell.timed[static_cast<size_t>(den)];
  const double x = field.p99 ? a.p99() : a.p50();
  const double y = field.p99 ? b.p99() : b.p50();
  return ratio_json(x, y);
}

void print_cell(const std::string& text, int width) { std::printf("%*s ", width, text.c_str()); }

constexpr int kSideWidth = 19;  // a side's "p50/p99" column
constexpr int kRoundsWidth = 6;

}  // namespace

std::vector<ClientPtr> connect_read_sides(const Harness& harness) {
  std::vector<ClientPtr> clients;
  for (int side = 0; side < kReadSides; ++side)
    clients.push_back(harness.connect(side == kReadRemold ? Via::remold : Via::direct));
  return clients;
}

std::string side_json(const SideSamples& s) {
  return JsonObject()
      .raw("p50_ms", number_or_null(s.p50()))
      .raw("p99_ms", number_or_null(s.p99()))
      .add("n", s.ms.size())
      .raw("cpu_us", JsonObject()
                         .raw("remold", number_or_null(us_of(s.remold_cpu_s)))
                         .raw("backend", number_or_null(us_of(s.backend_cpu_s)))
                         .str())
      .str();
}

std::string ReadCell::check_text() const {
  if (ok()) return "verified";
  return "FAILED: " + verify_message + failures.text("reads");
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

void print_read_progress(const ReadCell& cell, const ReadTable& table) {
  std::printf("%s: %zu rounds, p50 %s %.3f ms, %s %.3f ms, %s %.3f ms%s%s\n", cell.label.c_str(),
              cell.timed[kReadRemold].ms.size(), table.progress_names[kReadRemold], cell.timed[kReadRemold].p50(),
              table.progress_names[kReadDirect], cell.timed[kReadDirect].p50(), table.progress_names[kReadApp],
              cell.timed[kReadApp].p50(), cell.ok() ? "" : "; FAILED: ",
              cell.ok() ? "" : (cell.verify_message + cell.failures.first).c_str());
  std::fflush(stdout);
}

void print_read_table(const std::vector<ReadCell>& cells, const ReadTable& table) {
  std::printf("\n%s", table.title);
  for (const TableColumn& c : table.key_columns) print_cell(c.header, c.width);
  for (const char* header : table.side_headers) print_cell(header, kSideWidth);
  for (const RatioColumn& r : table.ratio_columns) print_cell(r.column.header, r.column.width);
  print_cell(table.backend_cpu.header, table.backend_cpu.width);
  print_cell("n", kRoundsWidth);
  std::printf("check\n");
  for (const ReadCell& cell : cells) {
    for (size_t i = 0; i < table.key_columns.size(); ++i)
      print_cell(cell.key_text[i], table.key_columns[i].width);
    for (const SideSamples& side : cell.timed) print_cell(ms_pair(side.ms), kSideWidth);
    for (const RatioColumn& r : table.ratio_columns) print_cell(ratio_cell(cell, r), r.column.width);
    print_cell(cpu_us(cell.timed[kReadDirect].backend_cpu_s) + "/" + cpu_us(cell.timed[kReadApp].backend_cpu_s),
               table.backend_cpu.width);
    std::printf("%*zu %s\n", kRoundsWidth, cell.timed[kReadRemold].ms.size(), cell.check_text().c_str());
  }
  std::printf("\n%s", table.legend.c_str());
  for (const ReadCell& cell : cells) {
    JsonObject j;
    j.add("bench", table.json_name);
    for (const auto& [key, json] : cell.key_json) j.raw(key, json);
    for (int side = 0; side < kReadSides; ++side)
      j.raw(table.side_json[side], side_json(cell.timed[static_cast<size_t>(side)]));
    for (const RatioField& field : table.ratio_fields) j.raw(field.key, ratio_field(cell, field));
    j.add("errors", cell.failures.count).add("ok", cell.ok()).add("load1", cell.load1).add("cores", usable_cores());
    print_bench_json(j);
  }
  std::fflush(stdout);
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
