// The rows and table of remold / direct / the application's reads: see
// read_table.h.
#include "read_table.h"

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

std::string ReadCell::check_text() const {
  if (ok()) return "verified";
  return "FAILED: " + verify_message + failures.text("reads");
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
      j.raw(table.side_keys[side], side_json(cell.timed[static_cast<size_t>(side)]));
    for (const RatioField& field : table.ratio_fields) j.raw(field.key, ratio_field(cell, field));
    j.add("errors", cell.failures.count).add("ok", cell.ok()).add("load1", cell.load1).add("cores", usable_cores());
    print_bench_json(j);
  }
  std::fflush(stdout);
}

}  // namespace bench_common
