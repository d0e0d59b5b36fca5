// What every bench shares: argument parsing, the machine header, elapsed
// time, percentiles and process CPU time.
//
// Contract:
//   - set_usage() names the program and its usage text once, before any
//     other argument helper; usage_error() then prints "PROGRAM: message"
//     and the usage to stderr and exits 2. The parse_* helpers and
//     check_endpoint() call usage_error() on bad input and return only
//     valid values.
//   - parse_flags() walks argv: -h/--help prints the usage to stdout and
//     exits 0; a flag listed in `switches` is applied with an empty value
//     (given "=value", it is an unknown argument); every other flag takes
//     "--flag=value" or the next argument.
//   - usage_lines() is the usage lines of one flag: "  FLAG" in a column
//     of 23, then the first line of text (one space after a longer flag),
//     then every further line indented to that column; default_text() is a
//     default value as usage lines print it (%g).
//   - parse_int_list() parses a comma-separated list of integers in lo..hi,
//     at least one; parse_count_list() one of counts in 1..hi.
//   - percentile() is nearest-rank (0 for no samples); median() averages the
//     two middle values of an even count (0 for no samples).
//   - usable_cores(), load_average(), process_cpu_seconds() and
//     self_cpu_seconds() return -1 when the system does not tell.
//   - bench_credentials() is the identity the bench's clients log in as,
//     from REMOLD_BENCH_USER, REMOLD_BENCH_PASSWORD and
//     REMOLD_BENCH_AUTH_SOURCE (admin): std::nullopt without a user (a
//     backend that needs no login). The same login goes to the backend
//     directly and through each proxy, as an application's would.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace bench_common {

// ---- arguments ---------------------------------------------------------------

void set_usage(const char* program, const char* usage);
[[noreturn]] void usage_error(const std::string& message);

std::string usage_lines(const std::string& flag, const std::vector<std::string>& lines);
std::string default_text(double value);

// The non-empty items of a comma-separated list.
std::vector<std::string> split_list(const std::string& text);
// A number > 0, or >= 0 with `allow_zero`.
double parse_number(const std::string& flag, const std::string& text, bool allow_zero = false);
// An integer in lo..hi (zero is allowed only when lo is 0).
int64_t parse_int(const std::string& flag, const std::string& text, int64_t lo, int64_t hi);
std::vector<int64_t> parse_int_list(const std::string& flag, const std::string& text, int64_t lo,
                                    int64_t hi);
std::vector<int> parse_count_list(const std::string& flag, const std::string& text, int hi);
// Checks that `text` looks like HOST:PORT.
void check_endpoint(const std::string& flag, const std::string& text);

using FlagHandler = std::function<void(const std::string& flag, const std::string& value)>;
void parse_flags(int argc, char** argv, const std::vector<std::string_view>& switches,
                 const FlagHandler& apply);

// ---- the machine -------------------------------------------------------------

int usable_cores();
// The 1-minute load average.
double load_average();
// Prints the header's "  cores: ..., load average before the run: ..." line,
// then `caveat` as it is.
void print_machine(const char* caveat);
// CPU seconds (user + system, all threads) of a process (pid > 0), or of
// this process.
double process_cpu_seconds(int pid);
double self_cpu_seconds();

// ---- time --------------------------------------------------------------------

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point start);
double ms_since(Clock::time_point start);

// ---- statistics --------------------------------------------------------------

// 0-based index of the nearest-rank p-percentile among n > 0 sorted samples.
size_t nearest_rank(size_t n, double p);
double percentile(std::vector<double> v, double p);
double median(std::vector<double> v);
// The lowest and highest a[i] / b[i] over the pairs with b[i] > 0 (round i
// of one side against round i of the other), std::nullopt when none.
std::optional<std::pair<double, double>> ratio_range(const std::vector<double>& a,
                                                     const std::vector<double>& b);

// `s` escaped for a JSON string (quotes, backslashes, control characters).
std::string json_escape(const std::string& s);

// ---- the login ---------------------------------------------------------------

struct Credentials {
  std::string user;
  std::string password;
  std::string source = "admin";
};
std::optional<Credentials> bench_credentials();

}  // namespace bench_common
