// remold_bench: remold against a direct connection to the same backend, and
// optionally against a peer proxy (HAProxy in tcp mode) in the same run.
//
// Contract: seeds bench.c through the direct endpoint, then for every
// op x client-count cell opens that many connections to each endpoint and
// times closed-loop round trips (one blocking client per thread) in slices
// that alternate the endpoints (direct, remold[, peer], then the reverse),
// discarding a warm-up at the start of every slice. Prints a table
// (throughput ratio to direct and added latency = percentile minus direct's,
// for remold and the peer; with --remold-pid/--peer-pid, the CPU time each
// proxy process spent per op over the measured windows) and one
// "BENCH_JSON {...}" line per cell. Exit
// status: 0 when every op succeeded, 1 on any failed op or fatal error, 2 on
// bad arguments.
#include "bench_common.h"
#include "bench_ops.h"
#include "latency.h"
#include "wire_client.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

namespace remold_bench {
namespace {

using namespace bench_common;

using Clock = std::chrono::steady_clock;

struct Config {
  Endpoint direct;
  Endpoint proxy;
  std::string peer_name;        // "" without a peer
  Endpoint peer;
  double seconds = 3.0;         // measured time per endpoint per cell
  double warmup = 0.2;          // discarded at the start of every slice
  int rounds = 6;               // direct/proxy slice pairs per cell
  double initial_warmup = 2.0;  // once, before the first cell
  int32_t docs = 10000;
  std::vector<int> clients{1, 16, 64};
  std::vector<OpKind> ops{OpKind::ping, OpKind::find_by_id};
  int remold_pid = 0;  // 0: its CPU time is not read
  int peer_pid = 0;
};

// ---- arguments -------------------------------------------------------------

const char kUsage[] =
    "usage: remold_bench --direct HOST:PORT --proxy HOST:PORT [--peer NAME=HOST:PORT]\n"
    "         [--seconds S] [--warmup S] [--rounds N] [--initial-warmup S] [--docs N]\n"
    "         [--clients 1,16,64] [--ops ping,find_by_id] [--remold-pid PID] [--peer-pid PID]\n"
    "  --peer NAME=HOST:PORT  another proxy in front of the same backend (e.g.\n"
    "                haproxy=127.0.0.1:27019), timed in the same slices\n"
    "  --seconds S   measured seconds per endpoint per cell (default 3)\n"
    "  --warmup S    discarded seconds at the start of each slice (default 0.2)\n"
    "  --rounds N    each cell runs N direct and N proxy slices of S/N seconds,\n"
    "                alternating in ABBA order (default 6)\n"
    "  --remold-pid PID, --peer-pid PID  report the CPU time (user + system, every\n"
    "                thread) that process spent per op while its slices were measured\n";

std::vector<int> parse_clients(const std::string& text) {
  std::vector<int> counts;
  for (const auto& item : split_list(text)) {
    const double n = parse_number("--clients", item, true);
    if (n < 1 || n > 1024 || n != static_cast<int>(n)) {
      usage_error("--clients takes integers 1..1024, got '" + item + "'");
    }
    counts.push_back(static_cast<int>(n));
  }
  if (counts.empty()) usage_error("--clients is empty");
  return counts;
}

std::vector<OpKind> parse_ops(const std::string& text) {
  std::vector<OpKind> ops;
  for (const auto& item : split_list(text)) {
    const auto op = parse_op(item);
    if (!op) usage_error("unknown op '" + item + "' (ping, find_by_id)");
    ops.push_back(*op);
  }
  if (ops.empty()) usage_error("--ops is empty");
  return ops;
}

Endpoint parse_endpoint_arg(const std::string& flag, const std::string& text) {
  try {
    return parse_endpoint(text);
  } catch (const std::invalid_argument& e) {
    usage_error(flag + ": " + e.what());
  }
}

// Applies one "--flag value" pair to the config.
void apply_flag(Config& cfg, const std::string& flag, const std::string& value) {
  if (flag == "--direct") {
    cfg.direct = parse_endpoint_arg(flag, value);
  } else if (flag == "--proxy") {
    cfg.proxy = parse_endpoint_arg(flag, value);
  } else if (flag == "--peer") {
    const size_t equals = value.find('=');
    if (equals == std::string::npos || equals == 0) usage_error("--peer takes NAME=HOST:PORT, got '" + value + "'");
    cfg.peer_name = value.substr(0, equals);
    cfg.peer = parse_endpoint_arg(flag, value.substr(equals + 1));
  } else if (flag == "--seconds") {
    cfg.seconds = parse_number(flag, value, true);
  } else if (flag == "--warmup") {
    cfg.warmup = parse_number(flag, value, true);
  } else if (flag == "--initial-warmup") {
    cfg.initial_warmup = parse_number(flag, value, true);
  } else if (flag == "--rounds") {
    cfg.rounds = std::max(1, static_cast<int>(parse_number(flag, value, true)));
  } else if (flag == "--docs") {
    cfg.docs = std::clamp(static_cast<int32_t>(parse_number(flag, value, true)), 1, 10'000'000);
  } else if (flag == "--clients") {
    cfg.clients = parse_clients(value);
  } else if (flag == "--ops") {
    cfg.ops = parse_ops(value);
  } else if (flag == "--remold-pid") {
    cfg.remold_pid = static_cast<int>(parse_number(flag, value, true));
  } else if (flag == "--peer-pid") {
    cfg.peer_pid = static_cast<int>(parse_number(flag, value, true));
  } else {
    usage_error("unknown argument '" + flag + "'");
  }
}

Config parse_args(int argc, char** argv) {
  set_usage("remold_bench", kUsage);
  Config cfg;
  parse_flags(argc, argv, {}, [&](const std::string& flag, const std::string& value) {
    apply_flag(cfg, flag, value);
  });
  if (cfg.direct.host.empty() || cfg.proxy.host.empty()) {
    usage_error("--direct and --proxy are required");
  }
  if (cfg.seconds <= 0) usage_error("--seconds must be positive");
  return cfg;
}

// ---- timed loop ------------------------------------------------------------

struct Window {
  Clock::time_point measure_from;  // ops starting earlier are warm-up
  Clock::time_point until;         // no op starts at or after this
};

struct ThreadResult {
  std::vector<uint32_t> latencies_ns;
  uint64_t errors = 0;
  std::string first_error;  // first failed op's description
  std::string fatal;        // set when the connection broke
};

// splitmix64: cheap per-thread pseudo-random _id choice.
uint64_t next_random(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint32_t elapsed_ns(Clock::time_point start, Clock::time_point end) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count();
  return static_cast<uint32_t>(std::clamp<int64_t>(ns, 0, UINT32_MAX));
}

// One client thread: closed loop of round trips until the window ends.
void client_loop(WireClient& client, OpKind op, int32_t docs, uint64_t seed,
                 Window window, ThreadResult& out) {
  out.latencies_ns.reserve(1 << 16);
  try {
    for (;;) {
      const auto start = Clock::now();
      if (start >= window.until) break;
      const auto id = static_cast<int32_t>(next_random(seed) % static_cast<uint64_t>(docs));
      const std::string error = run_op(client, op, id);
      const auto end = Clock::now();
      if (start < window.measure_from) continue;
      if (!error.empty()) {
        if (out.errors++ == 0) out.first_error = error;
        continue;
      }
      out.latencies_ns.push_back(elapsed_ns(start, end));
    }
  } catch (const WireError& e) {
    out.fatal = e.what();
  }
}

struct Target {
  const char* label;  // "direct", "remold" or the peer's name
  Endpoint endpoint;
  std::vector<std::unique_ptr<WireClient>> clients;
  Samples samples;
  std::vector<double> slice_rates;  // ops/s of each measured slice, in order
  std::string first_error;
  int pid = 0;               // the proxy's process, whose CPU time is read; 0: none
  double cpu_seconds = 0;    // its CPU time over the measured windows (-1: unreadable)
};

void open_clients(Target& target, int count) {
  target.clients.clear();
  for (int i = 0; i < count; ++i) {
    target.clients.push_back(std::make_unique<WireClient>(target.endpoint));
    handshake(*target.clients.back());
  }
}

Clock::duration seconds_to_duration(double seconds) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// Adds one thread's results to the target; throws when its connection broke.
void merge_result(Target& target, const ThreadResult& result) {
  if (!result.fatal.empty()) {
    throw WireError(std::string(target.label) + " connection failed: " + result.fatal);
  }
  auto& all = target.samples.latencies_ns;
  all.insert(all.end(), result.latencies_ns.begin(), result.latencies_ns.end());
  target.samples.errors += result.errors;
  if (target.first_error.empty()) target.first_error = result.first_error;
}

// Runs every client of `target` concurrently for warmup + seconds.
void run_slice(Target& target, OpKind op, int32_t docs, double warmup, double seconds,
               uint64_t seed) {
  const size_t n = target.clients.size();
  std::vector<ThreadResult> results(n);
  const auto start = Clock::now();
  const Window window{start + seconds_to_duration(warmup),
                      start + seconds_to_duration(warmup + seconds)};
  const size_t ops_before = target.samples.latencies_ns.size();
  std::vector<std::thread> threads;
  for (size_t i = 0; i < n; ++i) {
    threads.emplace_back(client_loop, std::ref(*target.clients[i]), op, docs,
                         seed * 1000003 + i, window, std::ref(results[i]));
  }
  if (target.pid > 0 && seconds > 0) {
    // The proxy's CPU time over the measured window only, read from here
    // while the client threads run.
    std::this_thread::sleep_until(window.measure_from);
    const double before = process_cpu_seconds(target.pid);
    std::this_thread::sleep_until(window.until);
    const double after = process_cpu_seconds(target.pid);
    if (before < 0 || after < 0 || target.cpu_seconds < 0)
      target.cpu_seconds = -1;
    else
      target.cpu_seconds += after - before;
  }
  for (auto& t : threads) t.join();
  for (const auto& result : results) merge_result(target, result);
  target.samples.seconds += seconds;
  if (seconds > 0) {
    const size_t ops = target.samples.latencies_ns.size() - ops_before;
    target.slice_rates.push_back(static_cast<double>(ops) / seconds);
  }
}

// ---- cells -----------------------------------------------------------------

struct Row {
  OpKind op;
  int clients;
  Summary direct;
  Summary proxy;
  double pair_ratio_min = 0;  // remold/direct throughput of single slice
  double pair_ratio_max = 0;  // pairs: their spread shows the run's noise
  std::optional<Summary> peer;
  double peer_pair_min = 0;   // the same for the peer
  double peer_pair_max = 0;
  double remold_cpu_us = -1;  // CPU time per op of the process, -1: not read
  double peer_cpu_us = -1;
};

// CPU microseconds per measured op of the target's process, -1 when not read.
double cpu_us_per_op(const Target& target) {
  if (target.pid <= 0 || target.cpu_seconds < 0 || target.samples.latencies_ns.empty()) return -1;
  return target.cpu_seconds * 1e6 / static_cast<double>(target.samples.latencies_ns.size());
}

// The min and max throughput ratio of `proxy` to direct over slice pairs.
void set_pair_ratios(const Target& direct, const Target& proxy, double& min, double& max) {
  const size_t pairs = std::min(direct.slice_rates.size(), proxy.slice_rates.size());
  for (size_t i = 0; i < pairs; ++i) {
    if (direct.slice_rates[i] <= 0) continue;
    const double r = proxy.slice_rates[i] / direct.slice_rates[i];
    min = min == 0 ? r : std::min(min, r);
    max = std::max(max, r);
  }
}

void report_errors(const Target& target, OpKind op, int clients) {
  if (target.samples.errors == 0) return;
  std::fprintf(stderr, "%s %s x%d: %llu failed ops, first: %s\n", target.label,
               op_name(op), clients, static_cast<unsigned long long>(target.samples.errors),
               target.first_error.c_str());
}

// One op x client-count cell: slices on every endpoint, in the order
// direct, remold[, peer] and then the reverse, round after round (ABBA).
Row run_cell(const Config& cfg, OpKind op, int clients) {
  std::vector<Target> targets;
  targets.push_back(Target{"direct", cfg.direct, {}, {}, {}, {}});
  targets.push_back(Target{"remold", cfg.proxy, {}, {}, {}, {}, cfg.remold_pid});
  if (!cfg.peer_name.empty())
    targets.push_back(Target{cfg.peer_name.c_str(), cfg.peer, {}, {}, {}, {}, cfg.peer_pid});
  for (Target& target : targets) open_clients(target, clients);
  const double slice = cfg.seconds / cfg.rounds;
  uint64_t seed = 1;
  for (int round = 0; round < cfg.rounds; ++round) {
    for (size_t k = 0; k < targets.size(); ++k) {
      Target& target = targets[round % 2 == 0 ? k : targets.size() - 1 - k];
      run_slice(target, op, cfg.docs, cfg.warmup, slice, seed++);
    }
  }
  for (const Target& target : targets) report_errors(target, op, clients);
  Row row{op, clients, summarize(targets[0].samples), summarize(targets[1].samples), 0, 0, std::nullopt, 0, 0};
  set_pair_ratios(targets[0], targets[1], row.pair_ratio_min, row.pair_ratio_max);
  row.remold_cpu_us = cpu_us_per_op(targets[1]);
  if (targets.size() > 2) {
    row.peer = summarize(targets[2].samples);
    set_pair_ratios(targets[0], targets[2], row.peer_pair_min, row.peer_pair_max);
    row.peer_cpu_us = cpu_us_per_op(targets[2]);
  }
  return row;
}

// Discarded traffic on both endpoints so JIT and caches settle first.
void initial_warmup(const Config& cfg) {
  if (cfg.initial_warmup <= 0) return;
  const double each = cfg.initial_warmup / (2.0 * cfg.ops.size());
  for (const OpKind op : cfg.ops) {
    std::vector<Endpoint> endpoints{cfg.direct, cfg.proxy};
    if (!cfg.peer_name.empty()) endpoints.push_back(cfg.peer);
    for (const Endpoint& endpoint : endpoints) {
      Target target{"warm-up", endpoint, {}, {}, {}, {}};
      open_clients(target, 2);
      run_slice(target, op, cfg.docs, each, 0, 0);
    }
  }
}

// ---- output ----------------------------------------------------------------

void print_header(const Config& cfg) {
  std::printf("remold_bench: direct %s, remold %s", cfg.direct.text().c_str(), cfg.proxy.text().c_str());
  if (!cfg.peer_name.empty()) std::printf(", %s %s", cfg.peer_name.c_str(), cfg.peer.text().c_str());
  std::printf("\n");
  std::printf("  %.1f s measured per endpoint per cell, in %d slices each (direct, remold%s, then the "
              "reverse), %.2f s warm-up discarded per slice; %d docs in bench.c\n",
              cfg.seconds, cfg.rounds, cfg.peer_name.empty() ? "" : (", " + cfg.peer_name).c_str(), cfg.warmup,
              cfg.docs);
  print_machine("  CAVEAT: the bench clients, remold and the backend share these cores.\n"
                "  With few cores and many clients they compete for CPU, so the throughput\n"
                "  ratio reflects remold's CPU cost per op as much as its latency, and the\n"
                "  percentiles include run-queue waits. Any other load on the machine adds\n"
                "  noise: 'pair ratios' is the min-max of remold/direct over slice pairs.\n"
                "  Compare rows from the same run only.\n\n");
}

void print_table_head(const Config& cfg) {
  std::printf("%-10s %7s %12s %12s %6s %11s %17s %17s %17s", "op", "clients",
              "direct op/s", "remold op/s", "ratio", "pair ratios", "direct p50/p99us",
              "remold p50/p99us", "added p50/p99us");
  if (!cfg.peer_name.empty())
    std::printf(" %12s %6s %11s %17s %7s", "peer op/s", "ratio", "pair ratios", "added p50/p99us", "R/peer");
  if (cfg.remold_pid > 0 || cfg.peer_pid > 0) std::printf(" %17s", "CPU us/op R/peer");
  std::printf("\n");
}

// "12.3" or "-" for a figure not read.
std::string cpu_text(double us) {
  if (us < 0) return "-";
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", us);
  return text;
}

double ratio(const Row& row) {
  return row.direct.ops_per_s > 0 ? row.proxy.ops_per_s / row.direct.ops_per_s : 0;
}

double peer_ratio(const Row& row) {
  return row.peer && row.direct.ops_per_s > 0 ? row.peer->ops_per_s / row.direct.ops_per_s : 0;
}

// "a/b" with one decimal, signed when `sign`; ratios use "a-b", 2 decimals.
std::string pair_text(double a, double b, bool sign) {
  char text[64];
  std::snprintf(text, sizeof text, sign ? "%+.1f/%+.1f" : "%.1f/%.1f", a, b);
  return text;
}

std::string range_text(double lo, double hi) {
  char text[64];
  std::snprintf(text, sizeof text, "%.2f-%.2f", lo, hi);
  return text;
}

void print_table_row(const Row& row) {
  std::printf("%-10s %7d %12.0f %12.0f %6.3f %11s %17s %17s %17s", op_name(row.op),
              row.clients, row.direct.ops_per_s, row.proxy.ops_per_s, ratio(row),
              range_text(row.pair_ratio_min, row.pair_ratio_max).c_str(),
              pair_text(row.direct.p50_us, row.direct.p99_us, false).c_str(),
              pair_text(row.proxy.p50_us, row.proxy.p99_us, false).c_str(),
              pair_text(row.proxy.p50_us - row.direct.p50_us,
                        row.proxy.p99_us - row.direct.p99_us, true).c_str());
  if (row.peer)
    std::printf(" %12.0f %6.3f %11s %17s %7.3f", row.peer->ops_per_s, peer_ratio(row),
                range_text(row.peer_pair_min, row.peer_pair_max).c_str(),
                pair_text(row.peer->p50_us - row.direct.p50_us, row.peer->p99_us - row.direct.p99_us, true).c_str(),
                row.peer->ops_per_s > 0 ? row.proxy.ops_per_s / row.peer->ops_per_s : 0);
  if (row.remold_cpu_us >= 0 || row.peer_cpu_us >= 0)
    std::printf(" %17s", (cpu_text(row.remold_cpu_us) + "/" + cpu_text(row.peer_cpu_us)).c_str());
  std::printf("\n");
  std::fflush(stdout);
}

void print_json_row(const Row& row, const Config& cfg) {
  std::printf(
      "BENCH_JSON {\"op\":\"%s\",\"clients\":%d,\"seconds\":%.2f,\"cores\":%d,"
      "\"direct_ops_s\":%.1f,\"remold_ops_s\":%.1f,\"ratio\":%.4f,"
      "\"pair_ratio_min\":%.4f,\"pair_ratio_max\":%.4f,"
      "\"direct_p50_us\":%.1f,\"direct_p99_us\":%.1f,"
      "\"remold_p50_us\":%.1f,\"remold_p99_us\":%.1f,"
      "\"added_p50_us\":%.1f,\"added_p99_us\":%.1f,"
      "\"direct_ops\":%llu,\"remold_ops\":%llu,"
      "\"direct_errors\":%llu,\"remold_errors\":%llu",
      op_name(row.op), row.clients, cfg.seconds, usable_cores(), row.direct.ops_per_s,
      row.proxy.ops_per_s, ratio(row), row.pair_ratio_min, row.pair_ratio_max,
      row.direct.p50_us, row.direct.p99_us,
      row.proxy.p50_us, row.proxy.p99_us, row.proxy.p50_us - row.direct.p50_us,
      row.proxy.p99_us - row.direct.p99_us,
      static_cast<unsigned long long>(row.direct.ops),
      static_cast<unsigned long long>(row.proxy.ops),
      static_cast<unsigned long long>(row.direct.errors),
      static_cast<unsigned long long>(row.proxy.errors));
  if (row.peer)
    std::printf(",\"peer\":\"%s\",\"peer_ops_s\":%.1f,\"peer_ratio\":%.4f,\"peer_p50_us\":%.1f,"
                "\"peer_p99_us\":%.1f,\"peer_added_p50_us\":%.1f,\"peer_errors\":%llu",
                cfg.peer_name.c_str(), row.peer->ops_per_s, peer_ratio(row), row.peer->p50_us, row.peer->p99_us,
                row.peer->p50_us - row.direct.p50_us, static_cast<unsigned long long>(row.peer->errors));
  if (row.remold_cpu_us >= 0) std::printf(",\"remold_cpu_us_per_op\":%.2f", row.remold_cpu_us);
  if (row.peer_cpu_us >= 0) std::printf(",\"peer_cpu_us_per_op\":%.2f", row.peer_cpu_us);
  std::printf("}\n");
}

// The target: find_by_id at 16 clients, added p50 <= 25 us and
// throughput >= 0.90x direct.
void print_target_check(const std::vector<Row>& rows) {
  for (const Row& row : rows) {
    if (row.op != OpKind::find_by_id || row.clients != 16) continue;
    const double added = row.proxy.p50_us - row.direct.p50_us;
    std::printf("\ntarget (find_by_id, 16 clients): added p50 %.1f us <= 25 us: %s; "
                "throughput ratio %.3f >= 0.90: %s\n",
                added, added <= 25 ? "PASS" : "FAIL", ratio(row),
                ratio(row) >= 0.90 ? "PASS" : "FAIL");
    return;
  }
  std::printf("\ntarget check skipped: it needs the find_by_id op at 16 clients\n");
}

// Against the peer (find_by_id): a throughput ratio at least the peer's at
// 16 and 64 clients, and an added p50 at 1 client within the peer's + 10 us.
void print_peer_check(const Config& cfg, const std::vector<Row>& rows) {
  if (cfg.peer_name.empty()) return;
  for (const Row& row : rows) {
    if (row.op != OpKind::find_by_id || !row.peer) continue;
    if (row.clients == 16 || row.clients == 64) {
      std::printf("against %s (find_by_id, %d clients): ratio %.3f >= %s's %.3f: %s", cfg.peer_name.c_str(),
                  row.clients, ratio(row), cfg.peer_name.c_str(), peer_ratio(row),
                  ratio(row) >= peer_ratio(row) ? "PASS" : "FAIL");
      if (row.remold_cpu_us >= 0 && row.peer_cpu_us >= 0)
        std::printf("; CPU per op %.1f us against %.1f us", row.remold_cpu_us, row.peer_cpu_us);
      std::printf("\n");
    } else if (row.clients == 1) {
      const double added = row.proxy.p50_us - row.direct.p50_us;
      const double peer_added = row.peer->p50_us - row.direct.p50_us;
      std::printf("against %s (find_by_id, 1 client): added p50 %.1f us <= %s's %.1f + 10 us: %s\n",
                  cfg.peer_name.c_str(), added, cfg.peer_name.c_str(), peer_added,
                  added <= peer_added + 10 ? "PASS" : "FAIL");
    }
  }
}

int run(const Config& cfg) {
  print_header(cfg);
  {
    WireClient seeder(cfg.direct);
    handshake(seeder);
    seed_collection(seeder, cfg.docs);
  }
  initial_warmup(cfg);
  print_table_head(cfg);
  std::vector<Row> rows;
  uint64_t errors = 0;
  for (const OpKind op : cfg.ops) {
    for (const int clients : cfg.clients) {
      rows.push_back(run_cell(cfg, op, clients));
      print_table_row(rows.back());
      errors += rows.back().direct.errors + rows.back().proxy.errors;
      if (rows.back().peer) errors += rows.back().peer->errors;
    }
  }
  std::printf("\n");
  for (const Row& row : rows) print_json_row(row, cfg);
  print_target_check(rows);
  print_peer_check(cfg, rows);
  std::printf("load average after the run: %.2f\n", load_average());
  return errors == 0 ? 0 : 1;
}

}  // namespace
}  // namespace remold_bench

int main(int argc, char** argv) {
  const auto cfg = remold_bench::parse_args(argc, argv);
  try {
    return remold_bench::run(cfg);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "remold_bench: fatal: %s\n", e.what());
    return 1;
  }
}
