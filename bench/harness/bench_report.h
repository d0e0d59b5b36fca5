// bench_report: how the pattern benches print numbers, in their tables and
// in their "BENCH_JSON {...}" lines.
//
// Contract:
//   - ms_pair() is "p50/p99" of latencies in ms ("-" for none); ratio_text()
//     is "1.23x" ("-" unless both numbers are > 0); fixed_or_unknown() is
//     the number with `decimals` decimals, "?" when it is negative (unknown).
//   - us_of() is CPU seconds per operation as microseconds, -1 (unknown)
//     kept; cpu_us() is that as a whole number for a table, "?" if unknown.
//   - number_or_null() formats a JSON number with a printf format, "null"
//     when it is negative (unknown) or not finite.
//   - ratio_json() is num / den as a JSON number, "null" unless both are > 0.
//   - JsonObject builds one JSON object in the order its fields are added:
//     strings are escaped, doubles print as an ostream prints them (6
//     significant digits), raw() takes text that is JSON already (null, a
//     nested object, a number formatted by the caller).
//   - print_bench_json() prints "BENCH_JSON " and the object on one line.
#pragma once

#include <concepts>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace bench_common {

std::string ms_pair(const std::vector<double>& ms);
std::string ratio_text(double num, double den);
std::string fixed_or_unknown(double value, int decimals);
double us_of(double seconds);
std::string cpu_us(double seconds);
std::string number_or_null(double value, const char* format = "%.4g");
std::string ratio_json(double num, double den);

class JsonObject {
 public:
  JsonObject& add(std::string_view key, std::string_view text);
  JsonObject& add(std::string_view key, const char* text) { return add(key, std::string_view(text)); }
  JsonObject& add(std::string_view key, bool value) { return raw(key, value ? "true" : "false"); }
  JsonObject& add(std::string_view key, double value);
  template <std::integral T>
  JsonObject& add(std::string_view key, T value) {
    return raw(key, std::to_string(value));
  }
  JsonObject& raw(std::string_view key, std::string_view json);
  std::string str() const { return text_ + "}"; }

 private:
  std::string text_ = "{";
};

std::string json_array(const std::vector<double>& values);
void print_bench_json(const JsonObject& object);

}  // namespace bench_common
