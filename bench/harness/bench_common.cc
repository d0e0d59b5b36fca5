// Helpers shared by the benches: see bench_common.h.
#include "bench_common.h"

#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace bench_common {
namespace {

const char* g_program = "bench";
const char* g_usage = "";

}  // namespace

void set_usage(const char* program, const char* usage) {
  g_program = program;
  g_usage = usage;
}

void usage_error(const std::string& message) {
  std::fprintf(stderr, "%s: %s\n%s", g_program, message.c_str(), g_usage);
  std::exit(2);
}

std::string usage_lines(const std::string& flag, const std::vector<std::string>& lines) {
  constexpr size_t kColumn = 23;
  std::string text = "  " + flag;
  text += text.size() < kColumn ? std::string(kColumn - text.size(), ' ') : std::string(" ");
  for (size_t i = 0; i < lines.size(); ++i)
    text += (i ? std::string(kColumn, ' ') : std::string()) + lines[i] + "\n";
  return text;
}

std::string default_text(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) items.push_back(item);
  return items;
}

double parse_number(const std::string& flag, const std::string& text, bool allow_zero) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(allow_zero ? value >= 0 : value > 0))
    usage_error(flag + " expects a " + (allow_zero ? "non-negative" : "positive") +
                " number, got '" + text + "'");
  return value;
}

int64_t parse_int(const std::string& flag, const std::string& text, int64_t lo, int64_t hi) {
  const double v = parse_number(flag, text, lo == 0);
  if (v != std::floor(v) || v < static_cast<double>(lo) || v > static_cast<double>(hi))
    usage_error(flag + " expects an integer " + std::to_string(lo) + ".." + std::to_string(hi) +
                ", got '" + text + "'");
  return static_cast<int64_t>(v);
}

std::vector<int64_t> parse_int_list(const std::string& flag, const std::string& text, int64_t lo,
                                    int64_t hi) {
  std::vector<int64_t> values;
  for (const auto& item : split_list(text)) values.push_back(parse_int(flag, item, lo, hi));
  if (values.empty()) usage_error(flag + " is empty");
  return values;
}

std::vector<int> parse_count_list(const std::string& flag, const std::string& text, int hi) {
  std::vector<int> counts;
  for (int64_t n : parse_int_list(flag, text, 1, hi)) counts.push_back(static_cast<int>(n));
  return counts;
}

void check_endpoint(const std::string& flag, const std::string& text) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    usage_error(flag + " expects HOST:PORT, got '" + text + "'");
}

void parse_flags(int argc, char** argv, const std::vector<std::string_view>& switches,
                 const FlagHandler& apply) {
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "-h" || flag == "--help") {
      std::fputs(g_usage, stdout);
      std::exit(0);
    }
    if (std::find(switches.begin(), switches.end(), flag) != switches.end()) {
      apply(flag, "");
      continue;
    }
    std::string value;
    if (const auto eq = flag.find('='); eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag.resize(eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      usage_error(flag + " needs a value");
    }
    // A switch given a value ("--keep=1") is no flag of the program.
    if (std::find(switches.begin(), switches.end(), flag) != switches.end())
      usage_error("unknown argument '" + flag + "'");
    apply(flag, value);
  }
}

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return -1;
  return CPU_COUNT(&set);
}

double load_average() {
  double load = -1;
  if (std::FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &load) != 1) load = -1;
    std::fclose(f);
  }
  return load;
}

void print_machine(const char* caveat) {
  std::printf("  cores: %ld online, %d usable by this process; load average before the run: "
              "%.2f\n", sysconf(_SC_NPROCESSORS_ONLN), usable_cores(), load_average());
  std::fputs(caveat, stdout);
}

double process_cpu_seconds(int pid) {
  if (pid <= 0) return -1;
  std::FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
  if (!f) return -1;
  char buf[4096];
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  const char* p = std::strrchr(buf, ')');  // the command name may hold spaces
  if (!p) return -1;
  // After ")": state(3) ppid pgrp session tty_nr tpgid flags minflt cminflt
  // majflt cmajflt utime(14) stime(15).
  unsigned long long utime = 0, stime = 0;
  if (std::sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime,
                  &stime) != 2)
    return -1;
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double self_cpu_seconds() {
  rusage u;
  if (getrusage(RUSAGE_SELF, &u) != 0) return -1;
  auto sec = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return sec(u.ru_utime) + sec(u.ru_stime);
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

size_t nearest_rank(size_t n, double p) {
  const auto rank = static_cast<size_t>(std::ceil(p * static_cast<double>(n)));
  return std::clamp<size_t>(rank, 1, n) - 1;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[nearest_rank(v.size(), p)];
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::optional<std::pair<double, double>> ratio_range(const std::vector<double>& a,
                                                     const std::vector<double>& b) {
  std::optional<std::pair<double, double>> range;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (!(b[i] > 0)) continue;
    const double r = a[i] / b[i];
    range = range ? std::pair{std::min(range->first, r), std::max(range->second, r)} : std::pair{r, r};
  }
  return range;
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

std::optional<Credentials> bench_credentials() {
  const char* user = std::getenv("REMOLD_BENCH_USER");
  if (!user || !*user) return std::nullopt;
  Credentials credentials{user, std::getenv("REMOLD_BENCH_PASSWORD") ? std::getenv("REMOLD_BENCH_PASSWORD") : ""};
  if (const char* source = std::getenv("REMOLD_BENCH_AUTH_SOURCE"); source && *source) credentials.source = source;
  return credentials;
}

}  // namespace bench_common
