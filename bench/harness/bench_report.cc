// Numbers as the pattern benches print them: see bench_report.h.
#include "bench_report.h"

#include "bench_common.h"

#include <cmath>
#include <cstdio>
#include <sstream>

namespace bench_common {

std::string ms_pair(const std::vector<double>& ms) {
  if (ms.empty()) return "-";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.2f/%.2f", percentile(ms, 0.5), percentile(ms, 0.99));
  return buf;
}

std::string ratio_text(double num, double den) {
  if (!(num > 0) || !(den > 0)) return "-";
  char buf[24];
  std::snprintf(buf, sizeof buf, "%.2fx", num / den);
  return buf;
}

std::string fixed_or_unknown(double value, int decimals) {
  if (!(value >= 0)) return "?";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
  return buf;
}

double us_of(double seconds) { return seconds >= 0 ? seconds * 1e6 : -1; }

std::string cpu_us(double seconds) { return fixed_or_unknown(us_of(seconds), 0); }

std::string number_or_null(double value, const char* format) {
  if (!(value >= 0) || !std::isfinite(value)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, format, value);
  return buf;
}

std::string ratio_json(double num, double den) { return number_or_null(num > 0 && den > 0 ? num / den : -1); }

JsonObject& JsonObject::add(std::string_view key, std::string_view text) {
  return raw(key, "\"" + json_escape(std::string(text)) + "\"");
}

JsonObject& JsonObject::add(std::string_view key, double value) {
  std::ostringstream out;
  out << value;
  return raw(key, out.str());
}

JsonObject& JsonObject::raw(std::string_view key, std::string_view json) {
  if (text_.size() > 1) text_ += ',';
  text_ += '"';
  text_ += key;
  text_ += "\":";
  text_ += json;
  return *this;
}

std::string json_array(const std::vector<double>& values) {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < values.size(); ++i) out << (i ? "," : "") << values[i];
  out << ']';
  return out.str();
}

void print_bench_json(const JsonObject& object) {
  std::printf("BENCH_JSON %s\n", object.str().c_str());
}

}  // namespace bench_common
