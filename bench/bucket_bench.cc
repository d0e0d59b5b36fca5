// bucket_bench: readings/s ingested through remold's bucket rule against
// flat inserts sent directly to the backend, with the same client code
// (mongo-c-driver) in the same run; plus the storage each layout takes.
//
// Contract:
//   - remold (--proxy) must run with the bucket rule printed in the header:
//     bench_bucket.readings -> bench_bucket.readings_buckets, meta [sensor],
//     time at, span 1h, summaries temp [sum, min, max]. bench/bucket_run.sh
//     writes that rule and starts remold with it.
//   - The flat side is bench_flat.readings on --direct, with a
//     {sensor: 1, at: 1} index, dropped and re-created before every case.
//   - The bucket collection is emptied with a direct delete before every
//     case, never dropped: remold ensures its bucket index once per process,
//     so a bucket collection dropped behind its back (directly on the
//     backend) would lose that index until remold restarts.
//   - Every case is verified afterwards through the direct connection
//     (document count; for buckets also the number of buckets and the
//     count/sum/min/max summaries against the data sent) and, for the
//     bucket side, through remold (count on the logical collection).
//   - Prints a table and one "BENCH_JSON {...}" line per row (ingest rows,
//     storage rows, target rows). Exit status: 0 when every insert succeeded
//     and every case verified, 1 otherwise, 2 on bad arguments. The target
//     (batched through remold >= 2x direct flat batched) is reported, not
//     enforced.
#include "bench_common.h"
#include "bench_mongoc.h"

#include <bson/bson.h>
#include <mongoc/mongoc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <latch>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace bucket_bench {
namespace {

using namespace bench_common;

using Clock = std::chrono::steady_clock;

constexpr const char* kBucketDb = "bench_bucket";
constexpr const char* kLogical = "readings";
constexpr const char* kBuckets = "readings_buckets";
constexpr const char* kFlatDb = "bench_flat";
constexpr const char* kFlat = "readings";
constexpr int64_t kT0Ms = 1704067200000;  // 2024-01-01T00:00:00Z, on an hour boundary
constexpr int64_t kSpanMs = 3'600'000;    // the rule's span: 1h
constexpr int kMinutesPerDay = 1440;

const char kRuleText[] =
    "namespace: bench_bucket.readings\n"
    "pattern: bucket\n"
    "bucket:\n"
    "  collection: readings_buckets\n"
    "  meta: [sensor]\n"
    "  time: at\n"
    "  span: 1h\n"
    "  summaries:\n"
    "    temp: [sum, min, max]\n";

enum class Order { time_major, sensor_major };
enum class Mode { single, batch };
// remold_flat: the flat collection through remold's fast path (no rule),
// opt-in with --passthrough, to separate the proxy hop from the rewrite.
enum class Target { remold_bucket, direct_flat, remold_flat };

const char* order_name(Order o) { return o == Order::time_major ? "time-major" : "sensor-major"; }
const char* target_name(Target t) {
  switch (t) {
    case Target::remold_bucket: return "remold-bucket";
    case Target::direct_flat: return "direct-flat";
    case Target::remold_flat: return "remold-flat";
  }
  return "?";
}
bool is_flat(Target t) { return t != Target::remold_bucket; }

struct Config {
  std::string direct;
  std::string proxy;
  int sensors = 10;
  double days = 7;          // data of the batched cases
  double single_days = 1;   // data of the one-reading-per-insert cases
  double warmup_days = 0.5; // untimed, per target, before the first case
  int batch = 1000;
  std::vector<int> threads{1, 8};
  std::vector<int> batch_threads{1};
  std::vector<Order> orders{Order::time_major, Order::sensor_major};
  int rounds = 3;
  bool keep = false;
  bool passthrough = false;
  int remold_pid = 0;   // for CPU accounting, when local
  int backend_pid = 0;
};

// ---- arguments -------------------------------------------------------------

const char kUsage[] =
    "usage: bucket_bench --direct HOST:PORT --proxy HOST:PORT [options]\n"
    "  --direct HOST:PORT   the backend (flat inserts, verification, stats)\n"
    "  --proxy HOST:PORT    remold, running the bucket rule for bench_bucket.readings\n"
    "  --sensors N          sensors (default 10), one reading per minute each\n"
    "  --days D             days of readings for the batched cases (default 7)\n"
    "  --single-days D      days of readings for the one-per-insert cases (default 1)\n"
    "  --warmup-days D      untimed warm-up load per target and mode (default 0.5)\n"
    "  --batch N            readings per insertMany (default 1000)\n"
    "  --threads 1,8        client threads of the one-per-insert cases\n"
    "  --batch-threads 1    client threads of the batched cases\n"
    "  --orders time,sensor interleavings: time-major (each minute all sensors)\n"
    "                       and/or sensor-major (each sensor's whole range)\n"
    "  --rounds N           run every case N times, report the median (default 3);\n"
    "                       remold and flat alternate which goes first per round\n"
    "  --keep               leave the last case's data in place at the end\n"
    "  --passthrough        also insert flat readings through remold (no rule: its\n"
    "                       fast path), rows 'remold-flat', to separate the proxy\n"
    "                       hop from the bucket rewrite\n"
    "  --remold-pid PID     report remold's CPU time per reading (local runs)\n"
    "  --backend-pid PID    report the backend's CPU time per reading (local runs)\n";

int int_arg(const std::string& flag, const std::string& text, int lo, int hi) {
  return static_cast<int>(parse_int(flag, text, lo, hi));
}

std::vector<int> parse_int_list(const std::string& flag, const std::string& text) {
  std::vector<int> out;
  for (const auto& item : split_list(text)) out.push_back(int_arg(flag, item, 1, 256));
  if (out.empty()) usage_error(flag + " is empty");
  return out;
}

std::vector<Order> parse_orders(const std::string& text) {
  std::vector<Order> out;
  for (const auto& item : split_list(text)) {
    if (item == "time" || item == "time-major") out.push_back(Order::time_major);
    else if (item == "sensor" || item == "sensor-major") out.push_back(Order::sensor_major);
    else usage_error("unknown order '" + item + "' (time, sensor)");
  }
  if (out.empty()) usage_error("--orders is empty");
  return out;
}

Config parse_args(int argc, char** argv) {
  set_usage("bucket_bench", kUsage);
  Config cfg;
  parse_flags(argc, argv, {"--keep", "--passthrough"}, [&](const std::string& flag,
                                                           const std::string& value) {
    if (flag == "--keep") cfg.keep = true;
    else if (flag == "--passthrough") cfg.passthrough = true;
    else if (flag == "--direct") check_endpoint(flag, cfg.direct = value);
    else if (flag == "--proxy") check_endpoint(flag, cfg.proxy = value);
    else if (flag == "--sensors") cfg.sensors = int_arg(flag, value, 1, 100000);
    else if (flag == "--days") cfg.days = parse_number(flag, value);
    else if (flag == "--single-days") cfg.single_days = parse_number(flag, value);
    else if (flag == "--warmup-days") cfg.warmup_days = std::strtod(value.c_str(), nullptr);
    else if (flag == "--batch") cfg.batch = int_arg(flag, value, 1, 100000);
    else if (flag == "--threads") cfg.threads = parse_int_list(flag, value);
    else if (flag == "--batch-threads") cfg.batch_threads = parse_int_list(flag, value);
    else if (flag == "--orders") cfg.orders = parse_orders(value);
    else if (flag == "--rounds") cfg.rounds = int_arg(flag, value, 1, 100);
    else if (flag == "--remold-pid") cfg.remold_pid = int_arg(flag, value, 1, 1 << 30);
    else if (flag == "--backend-pid") cfg.backend_pid = int_arg(flag, value, 1, 1 << 30);
    else usage_error("unknown argument '" + flag + "'");
  });
  if (cfg.direct.empty() || cfg.proxy.empty()) usage_error("--direct and --proxy are required");
  return cfg;
}

// ---- small helpers ---------------------------------------------------------

// Sum of the numeric values of a sub-document (per-index sizes).
std::optional<double> sum_of_subdocument(const bson_t* doc, const char* key) {
  bson_iter_t it, child;
  if (!bson_iter_init_find(&it, doc, key) || !BSON_ITER_HOLDS_DOCUMENT(&it) ||
      !bson_iter_recurse(&it, &child))
    return std::nullopt;
  double total = 0;
  while (bson_iter_next(&child))
    if (BSON_ITER_HOLDS_NUMBER(&child)) total += bson_iter_as_double(&child);
  return total;
}

struct CpuSample {
  double client, remold, backend;
};

CpuSample cpu_now(const Config& cfg) {
  return {self_cpu_seconds(), process_cpu_seconds(cfg.remold_pid),
          process_cpu_seconds(cfg.backend_pid)};
}

// ---- data ------------------------------------------------------------------

struct Reading {
  int sensor;
  int64_t minute;
};

struct Dataset {
  Order order;
  int sensors;
  int64_t minutes;
  std::vector<bson_t*> docs;  // owned
  std::vector<int64_t> bucket_key;  // per reading: sensor + hour, for coalescing
  double temp_sum = 0, temp_min = 0, temp_max = 0;
  int64_t buckets = 0;  // distinct (sensor, hour)

  Dataset() = default;
  Dataset(const Dataset&) = delete;
  Dataset& operator=(const Dataset&) = delete;
  ~Dataset() {
    for (bson_t* d : docs) bson_destroy(d);
  }
  size_t size() const { return docs.size(); }
};

// Deterministic temperature: a daily cycle, a per-sensor offset and noise,
// rounded to 0.01 degrees.
double temperature(int sensor, int64_t minute) {
  uint64_t h = static_cast<uint64_t>(sensor) * 0x9e3779b97f4a7c15ULL ^
               static_cast<uint64_t>(minute) * 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 31;
  const double noise = static_cast<double>(h % 1000) / 1000.0 - 0.5;
  const double t = 18.0 + 0.3 * sensor + 4.0 * std::sin(2 * M_PI * static_cast<double>(minute) / kMinutesPerDay) + noise;
  return std::round(t * 100.0) / 100.0;
}

std::unique_ptr<Dataset> make_dataset(Order order, int sensors, double days) {
  auto ds = std::make_unique<Dataset>();
  ds->order = order;
  ds->sensors = sensors;
  ds->minutes = std::max<int64_t>(1, std::llround(days * kMinutesPerDay));
  const int64_t n = ds->minutes * sensors;
  ds->docs.reserve(n);
  ds->bucket_key.reserve(n);
  std::vector<std::string> names;
  for (int s = 0; s < sensors; ++s) {
    char name[32];
    std::snprintf(name, sizeof name, "sensor-%02d", s);
    names.push_back(name);
  }
  std::set<int64_t> keys;
  bool first = true;
  for (int64_t i = 0; i < n; ++i) {
    const Reading r = order == Order::time_major
                          ? Reading{static_cast<int>(i % sensors), i / sensors}
                          : Reading{static_cast<int>(i / ds->minutes), i % ds->minutes};
    const double temp = temperature(r.sensor, r.minute);
    bson_t* doc = bson_new();
    BSON_APPEND_UTF8(doc, "sensor", names[r.sensor].c_str());
    BSON_APPEND_DATE_TIME(doc, "at", kT0Ms + r.minute * 60'000);
    BSON_APPEND_DOUBLE(doc, "temp", temp);
    ds->docs.push_back(doc);
    const int64_t key = static_cast<int64_t>(r.sensor) * 1'000'000'000 + (r.minute * 60'000) / kSpanMs;
    ds->bucket_key.push_back(key);
    keys.insert(key);
    ds->temp_sum += temp;
    ds->temp_min = first ? temp : std::min(ds->temp_min, temp);
    ds->temp_max = first ? temp : std::max(ds->temp_max, temp);
    first = false;
  }
  ds->buckets = static_cast<int64_t>(keys.size());
  return ds;
}

// Backend write statements remold sends for these inserts, mirroring
// rewrite/bucket_insert.cc: one upsert per bucket per insert command when
// unordered, one per run of consecutive same-bucket readings when ordered.
int64_t bucket_statements(const Dataset& ds, size_t per_insert, bool ordered) {
  int64_t total = 0;
  for (size_t start = 0; start < ds.size(); start += per_insert) {
    const size_t end = std::min(ds.size(), start + per_insert);
    if (ordered) {
      for (size_t i = start; i < end; ++i)
        if (i == start || ds.bucket_key[i] != ds.bucket_key[i - 1]) ++total;
    } else {
      std::set<int64_t> keys(ds.bucket_key.begin() + start, ds.bucket_key.begin() + end);
      total += static_cast<int64_t>(keys.size());
    }
  }
  return total;
}

// ---- cases -----------------------------------------------------------------

struct CaseSpec {
  Order order;
  Mode mode;
  bool ordered;  // batched cases only
  int threads;
  Target target;
};

std::string mode_text(const CaseSpec& s, int batch) {
  if (s.mode == Mode::single) return "one per insert";
  return "insertMany " + std::to_string(batch);
}

struct CaseResult {
  CaseSpec spec;
  int64_t readings = 0;
  int64_t commands = 0;
  double seconds = 0;
  std::vector<double> latency_ms;  // per insert command
  uint64_t errors = 0;
  std::string first_error;
  bool verified = false;
  std::string verify_message;
  int64_t backend_docs = 0;
  int64_t statements = 0;  // backend write statements (computed)
  double load = 0;
  // CPU seconds spent during the timed part: the bench client (all its
  // threads), remold and the backend; -1 when unknown.
  double cpu_client = -1, cpu_remold = -1, cpu_backend = -1;
  double rate() const { return seconds > 0 ? static_cast<double>(readings) / seconds : 0; }
};

struct StorageStats {
  bool captured = false;
  std::string ns;
  std::string coll_stats_json;
  std::string db_stats_json;
  std::vector<std::string> indexes;
  double documents = -1, data_size = -1, storage_size = -1, index_size = -1, db_data_size = -1,
         db_index_size = -1, nindexes = -1;
  int64_t readings = 0;
};

class Bench {
 public:
  explicit Bench(const Config& cfg) : cfg_(cfg) {}
  int run();

 private:
  void print_header();
  void reset(Target target);
  CaseResult run_case(const CaseSpec& spec, const Dataset& ds, bool quiet);
  void verify(CaseResult& r, const Dataset& ds);
  void capture_storage(Target target, int64_t readings);
  void print_row(const CaseResult& r, const char* tag);
  void print_summary(const std::vector<std::vector<CaseResult>>& cases);
  void print_storage();

  const Config& cfg_;
  ClientPtr admin_direct_;
  ClientPtr admin_proxy_;
  StorageStats storage_[2];
};

void Bench::print_header() {
  std::printf("bucket_bench: direct %s (backend), remold %s\n", cfg_.direct.c_str(),
              cfg_.proxy.c_str());
  std::printf("  remold rule (bench_bucket.readings -> bench_bucket.readings_buckets):\n");
  std::istringstream rule(kRuleText);
  for (std::string line; std::getline(rule, line);) std::printf("    | %s\n", line.c_str());
  std::printf("  flat: bench_flat.readings on the backend directly, index {sensor: 1, at: 1}\n");
  std::printf("  data: %d sensors, one reading per minute, {sensor: \"sensor-NN\", at: Date, "
              "temp: double}\n", cfg_.sensors);
  std::printf("    batched cases: %g days = %lld readings; one-per-insert cases: %g days = "
              "%lld readings\n", cfg_.days,
              static_cast<long long>(std::llround(cfg_.days * kMinutesPerDay)) * cfg_.sensors,
              cfg_.single_days,
              static_cast<long long>(std::llround(cfg_.single_days * kMinutesPerDay)) * cfg_.sensors);
  std::printf("    time-major: minute by minute, all sensors each minute (how a fleet reports);\n"
              "    sensor-major: one sensor's whole range, then the next (a backfill)\n");
  std::printf("  client: mongo-c-driver %s, one mongoc_client_t (one connection) per thread,\n"
              "    insert_one / insert_many; the driver adds an ObjectId _id to every reading,\n"
              "    which the bucket rule keeps inside each measurement. Threads share one\n"
              "    cursor over the readings, so concurrent inserts stay in the data's order.\n",
              mongoc_get_version());
  if (cfg_.passthrough)
    std::printf("  remold-flat rows: the flat inserts sent through remold (no rule for\n"
                "    bench_flat.readings, so its byte-for-byte fast path)\n");
  std::printf("  every case starts empty and is verified afterwards; %d round(s), median shown;\n"
              "  %.2g days of untimed warm-up per target and mode first\n", cfg_.rounds,
              cfg_.warmup_days);
  print_machine("  CAVEAT: the bench client, remold and the backend share these cores, and\n"
                "  other load on the machine (see the load column) moves every number.\n\n");
  std::fflush(stdout);
}

// Empties the target's collection: flat is dropped and its index re-created;
// the bucket collection is emptied with a delete, keeping remold's index.
void Bench::reset(Target target) {
  if (is_flat(target)) {
    command(admin_direct_.get(), kFlatDb, json(R"({"drop": "readings"})").get(), true);
    command(admin_direct_.get(), kFlatDb,
            json(R"({"createIndexes": "readings", "indexes": [{"key": {"sensor": 1, "at": 1},
                     "name": "sensor_1_at_1"}]})").get());
  } else {
    command(admin_direct_.get(), kBucketDb,
            json(R"({"delete": "readings_buckets", "deletes": [{"q": {}, "limit": 0}]})").get());
  }
}

CaseResult Bench::run_case(const CaseSpec& spec, const Dataset& ds, bool quiet) {
  reset(spec.target);
  CaseResult result;
  result.spec = spec;
  const std::string& endpoint = spec.target == Target::direct_flat ? cfg_.direct : cfg_.proxy;
  const char* db = spec.target == Target::remold_bucket ? kBucketDb : kFlatDb;
  const char* coll = spec.target == Target::remold_bucket ? kLogical : kFlat;
  const size_t per_insert = spec.mode == Mode::single ? 1 : static_cast<size_t>(cfg_.batch);
  const size_t units = (ds.size() + per_insert - 1) / per_insert;

  std::vector<ClientPtr> clients;
  for (int t = 0; t < spec.threads; ++t) clients.push_back(connect(endpoint, "bucket_bench"));

  struct ThreadOut {
    std::vector<double> latency_ms;
    uint64_t errors = 0;
    std::string first_error;
    int64_t inserted = 0;
  };
  std::vector<ThreadOut> outs(spec.threads);
  std::atomic<size_t> next{0};
  std::latch ready(spec.threads + 1);
  std::latch go(1);
  std::vector<std::thread> threads;
  for (int t = 0; t < spec.threads; ++t) {
    threads.emplace_back([&, t] {
      ThreadOut& out = outs[t];
      out.latency_ms.reserve(units / spec.threads + 16);
      CollectionPtr collection(mongoc_client_get_collection(clients[t].get(), db, coll));
      BsonPtr opts = json(spec.ordered ? R"({"ordered": true})" : R"({"ordered": false})");
      ready.count_down();
      go.wait();
      for (;;) {
        const size_t unit = next.fetch_add(1, std::memory_order_relaxed);
        if (unit >= units) break;
        const size_t begin = unit * per_insert;
        const size_t count = std::min(per_insert, ds.size() - begin);
        bson_error_t error;
        bool ok;
        int64_t inserted = 0;
        const auto start = Clock::now();
        if (spec.mode == Mode::single) {
          ok = mongoc_collection_insert_one(collection.get(), ds.docs[begin], nullptr, nullptr,
                                            &error);
          inserted = ok ? 1 : 0;
        } else {
          bson_t reply;
          ok = mongoc_collection_insert_many(
              collection.get(), const_cast<const bson_t**>(ds.docs.data() + begin), count,
              opts.get(), &reply, &error);
          const auto n = number_at(&reply, "insertedCount");
          inserted = n ? static_cast<int64_t>(*n) : 0;
          if (ok && inserted != static_cast<int64_t>(count)) {
            ok = false;
            std::snprintf(error.message, sizeof error.message,
                          "insertedCount %lld of %zu; reply %s", static_cast<long long>(inserted),
                          count, to_json(&reply).c_str());
          }
          bson_destroy(&reply);
        }
        const auto end = Clock::now();
        out.latency_ms.push_back(std::chrono::duration<double, std::milli>(end - start).count());
        out.inserted += inserted;
        if (!ok && out.errors++ == 0) out.first_error = error.message;
      }
    });
  }
  ready.arrive_and_wait();
  const CpuSample cpu_before = cpu_now(cfg_);
  const auto start = Clock::now();
  go.count_down();
  for (auto& th : threads) th.join();
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const CpuSample cpu_after = cpu_now(cfg_);
  auto delta = [](double a, double b) { return a >= 0 && b >= 0 ? b - a : -1; };
  result.cpu_client = delta(cpu_before.client, cpu_after.client);
  result.cpu_remold = delta(cpu_before.remold, cpu_after.remold);
  result.cpu_backend = delta(cpu_before.backend, cpu_after.backend);
  result.load = load_average();
  result.commands = static_cast<int64_t>(units);
  for (auto& out : outs) {
    result.latency_ms.insert(result.latency_ms.end(), out.latency_ms.begin(), out.latency_ms.end());
    result.errors += out.errors;
    result.readings += out.inserted;
    if (result.first_error.empty()) result.first_error = out.first_error;
  }
  result.statements = spec.target == Target::remold_bucket
                          ? bucket_statements(ds, per_insert, spec.mode == Mode::batch && spec.ordered)
                          : static_cast<int64_t>(ds.size());
  // Only fully inserted cases count as throughput; a failed insert makes the
  // row an error row.
  verify(result, ds);
  if (result.errors && !quiet)
    std::fprintf(stderr, "bucket_bench: %s %s: %llu failed inserts, first: %s\n",
                 target_name(spec.target), mode_text(spec, cfg_.batch).c_str(),
                 static_cast<unsigned long long>(result.errors), result.first_error.c_str());
  return result;
}

void Bench::verify(CaseResult& r, const Dataset& ds) {
  const int64_t expected = static_cast<int64_t>(ds.size());
  std::ostringstream msg;
  bool ok = r.readings == expected && r.errors == 0;
  if (r.readings != expected) msg << "inserted " << r.readings << " of " << expected << "; ";
  if (is_flat(r.spec.target)) {
    auto reply = command(admin_direct_.get(), kFlatDb, json(R"({"count": "readings"})").get());
    r.backend_docs = static_cast<int64_t>(number_at(reply.get(), "n").value_or(-1));
    if (r.backend_docs != expected) {
      ok = false;
      msg << "backend has " << r.backend_docs << " flat documents, expected " << expected << "; ";
    }
  } else {
    auto pipeline = json(R"({"aggregate": "readings_buckets", "cursor": {}, "pipeline": [
        {"$group": {"_id": null, "buckets": {"$sum": 1}, "n": {"$sum": "$count"},
                    "s": {"$sum": "$sum.temp"}, "mn": {"$min": "$min.temp"},
                    "mx": {"$max": "$max.temp"}}}]})");
    auto reply = command(admin_direct_.get(), kBucketDb, pipeline.get());
    auto at = [&](const char* f) {
      return number_at(reply.get(), (std::string("cursor.firstBatch.0.") + f).c_str()).value_or(-1);
    };
    r.backend_docs = static_cast<int64_t>(at("buckets"));
    const auto n = static_cast<int64_t>(at("n"));
    const double s = at("s"), mn = at("mn"), mx = at("mx");
    if (r.backend_docs != ds.buckets) {
      ok = false;
      msg << "backend has " << r.backend_docs << " buckets, expected " << ds.buckets << "; ";
    }
    if (n != expected) {
      ok = false;
      msg << "bucket counts sum to " << n << ", expected " << expected << "; ";
    }
    if (std::fabs(s - ds.temp_sum) > 1e-9 * std::fabs(ds.temp_sum) + 1e-6 || mn != ds.temp_min ||
        mx != ds.temp_max) {
      ok = false;
      msg << "summaries sum/min/max " << s << "/" << mn << "/" << mx << ", expected "
          << ds.temp_sum << "/" << ds.temp_min << "/" << ds.temp_max << "; ";
    }
    // The read path too: count on the logical collection, through remold.
    auto count = command(admin_proxy_.get(), kBucketDb, json(R"({"count": "readings"})").get(), true);
    const auto logical = static_cast<int64_t>(number_at(count.get(), "n").value_or(-1));
    if (logical != expected) {
      ok = false;
      msg << "count through remold says " << logical << ", expected " << expected
          << " (reply " << to_json(count.get()) << "); ";
    }
  }
  r.verified = ok;
  r.verify_message = msg.str();
}

void Bench::capture_storage(Target target, int64_t readings) {
  StorageStats& st = storage_[target == Target::remold_bucket ? 0 : 1];
  if (st.captured) return;
  const char* db = target == Target::remold_bucket ? kBucketDb : kFlatDb;
  const char* coll = target == Target::remold_bucket ? kBuckets : kFlat;
  st.captured = true;
  st.readings = readings;
  st.ns = std::string(db) + "." + coll;
  BsonPtr cmd(BCON_NEW("collStats", BCON_UTF8(coll)));
  auto cs = command(admin_direct_.get(), db, cmd.get(), true);
  st.coll_stats_json = to_json(cs.get());
  auto ds = command(admin_direct_.get(), db, json(R"({"dbStats": 1})").get(), true);
  st.db_stats_json = to_json(ds.get());
  st.documents = number_at(cs.get(), "count").value_or(-1);
  st.data_size = number_at(cs.get(), "size").value_or(-1);
  st.storage_size = number_at(cs.get(), "storageSize").value_or(-1);
  st.nindexes = number_at(cs.get(), "nindexes").value_or(-1);
  // mongod: totalIndexSize (bytes) and indexSizes; mongo-java-server:
  // indexSize as a per-index document.
  if (auto t = number_at(cs.get(), "totalIndexSize")) st.index_size = *t;
  else if (auto t2 = sum_of_subdocument(cs.get(), "indexSizes")) st.index_size = *t2;
  else if (auto t3 = sum_of_subdocument(cs.get(), "indexSize")) st.index_size = *t3;
  else st.index_size = number_at(cs.get(), "indexSize").value_or(-1);
  st.db_data_size = number_at(ds.get(), "dataSize").value_or(-1);
  st.db_index_size = number_at(ds.get(), "indexSize").value_or(-1);
  BsonPtr li(BCON_NEW("listIndexes", BCON_UTF8(coll)));
  auto indexes = command(admin_direct_.get(), db, li.get(), true);
  bson_iter_t it, batch;
  if (bson_iter_init(&it, indexes.get()) &&
      bson_iter_find_descendant(&it, "cursor.firstBatch", &batch) && BSON_ITER_HOLDS_ARRAY(&batch)) {
    bson_iter_t entry;
    bson_iter_recurse(&batch, &entry);
    while (bson_iter_next(&entry)) {
      uint32_t len;
      const uint8_t* data;
      bson_iter_document(&entry, &len, &data);
      bson_t index;
      if (bson_init_static(&index, data, len)) st.indexes.push_back(to_json(&index));
    }
  }
}

void Bench::print_row(const CaseResult& r, const char* tag) {
  std::printf("  %-6s %-12s %-16s %-5s %3d %-13s %8lld %8.2f %10.0f %s%s\n", tag,
              order_name(r.spec.order), mode_text(r.spec, cfg_.batch).c_str(),
              r.spec.mode == Mode::single ? "-" : (r.spec.ordered ? "true" : "false"),
              r.spec.threads, target_name(r.spec.target), static_cast<long long>(r.readings),
              r.seconds, r.rate(), r.verified ? "ok" : "NOT VERIFIED: ",
              r.verified ? "" : r.verify_message.c_str());
  std::fflush(stdout);
}

struct Key {
  Order order;
  Mode mode;
  bool ordered;
  int threads;
  bool operator<(const Key& o) const {
    return std::tie(order, mode, ordered, threads) < std::tie(o.order, o.mode, o.ordered, o.threads);
  }
};

// min and max of remold/flat over the rounds (round i against round i).
std::pair<double, double> round_ratio_range(const std::vector<CaseResult>& rounds,
                                            const std::vector<double>& flat) {
  double lo = 0, hi = 0;
  for (size_t i = 0; i < rounds.size() && i < flat.size(); ++i) {
    if (flat[i] <= 0) continue;
    const double r = rounds[i].rate() / flat[i];
    lo = lo == 0 ? r : std::min(lo, r);
    hi = std::max(hi, r);
  }
  return {lo, hi};
}

void Bench::print_summary(const std::vector<std::vector<CaseResult>>& cases) {
  // cases: one vector per case spec (all rounds), in run order.
  std::map<Key, double> flat_rate;
  std::map<Key, std::vector<double>> flat_rounds;  // per-round rates
  auto rate_of = [](const std::vector<CaseResult>& rounds) {
    std::vector<double> rates;
    for (const auto& r : rounds) rates.push_back(r.rate());
    return median(rates);
  };
  for (const auto& rounds : cases) {
    const CaseSpec& s = rounds.front().spec;
    if (s.target != Target::direct_flat) continue;
    flat_rate[{s.order, s.mode, s.ordered, s.threads}] = rate_of(rounds);
    for (const auto& r : rounds) flat_rounds[{s.order, s.mode, s.ordered, s.threads}].push_back(r.rate());
  }
  std::printf("\n%-12s %-16s %-5s %3s %-13s %8s %8s %10s %7s %11s %9s %15s %17s %6s %5s\n",
              "order", "insert", "ord", "thr", "target", "readings", "seconds", "readings/s",
              "vs flat", "round range", "stmts/cmd", "p50/p99 ms/cmd", "cpu us/reading", "errors",
              "load");
  std::vector<std::string> json_lines;
  for (const auto& rounds : cases) {
    const CaseResult& first = rounds.front();
    const CaseSpec& s = first.spec;
    std::vector<double> rates, secs, lat, cpu_c, cpu_r, cpu_b;
    uint64_t errors = 0;
    bool verified = true;
    double load = 0;
    for (const auto& r : rounds) {
      rates.push_back(r.rate());
      secs.push_back(r.seconds);
      lat.insert(lat.end(), r.latency_ms.begin(), r.latency_ms.end());
      errors += r.errors;
      verified = verified && r.verified;
      load = std::max(load, r.load);
      const double n = static_cast<double>(std::max<int64_t>(1, r.readings));
      if (r.cpu_client >= 0) cpu_c.push_back(r.cpu_client * 1e6 / n);
      if (r.cpu_remold >= 0) cpu_r.push_back(r.cpu_remold * 1e6 / n);
      if (r.cpu_backend >= 0) cpu_b.push_back(r.cpu_backend * 1e6 / n);
    }
    auto cpu_text = [](const std::vector<double>& v) {
      if (v.empty()) return std::string("?");
      char buf[16];
      std::snprintf(buf, sizeof buf, "%.1f", median(v));
      return std::string(buf);
    };
    auto cpu_json = [](const std::vector<double>& v) {
      if (v.empty()) return std::string("null");
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.2f", median(v));
      return std::string(buf);
    };
    const std::string cpu = cpu_text(cpu_c) + "/" + cpu_text(cpu_r) + "/" + cpu_text(cpu_b);
    const double rate = median(rates);
    const auto flat = flat_rate.find({s.order, s.mode, s.ordered, s.threads});
    const double vs = flat != flat_rate.end() && flat->second > 0 ? rate / flat->second : 0;
    const double stmts = static_cast<double>(first.statements) / static_cast<double>(first.commands);
    const double p50 = percentile(lat, 0.50), p99 = percentile(lat, 0.99);
    char vs_text[16], lat_text[32], range_text[32];
    const auto range = round_ratio_range(rounds, flat_rounds[{s.order, s.mode, s.ordered, s.threads}]);
    if (s.target == Target::direct_flat) {
      std::snprintf(vs_text, sizeof vs_text, "-");
      std::snprintf(range_text, sizeof range_text, "-");
    } else {
      std::snprintf(vs_text, sizeof vs_text, "%.2fx", vs);
      std::snprintf(range_text, sizeof range_text, "%.2f-%.2f", range.first, range.second);
    }
    std::snprintf(lat_text, sizeof lat_text, "%.2f/%.2f", p50, p99);
    std::printf("%-12s %-16s %-5s %3d %-13s %8lld %8.2f %10.0f %7s %11s %9.1f %15s %17s %6llu %5.2f%s\n",
                order_name(s.order), mode_text(s, cfg_.batch).c_str(),
                s.mode == Mode::single ? "-" : (s.ordered ? "true" : "false"), s.threads,
                target_name(s.target), static_cast<long long>(first.readings), median(secs), rate,
                vs_text, range_text, stmts, lat_text, cpu.c_str(), static_cast<unsigned long long>(errors), load,
                verified ? "" : "  NOT VERIFIED");
    std::ostringstream j;
    j << "BENCH_JSON {\"bench\":\"bucket_ingest\",\"order\":\"" << order_name(s.order)
      << "\",\"insert\":\"" << (s.mode == Mode::single ? "one" : "many")
      << "\",\"per_insert\":" << (s.mode == Mode::single ? 1 : cfg_.batch)
      << ",\"ordered\":" << (s.mode == Mode::single ? "null" : (s.ordered ? "true" : "false"))
      << ",\"threads\":" << s.threads << ",\"target\":\"" << target_name(s.target)
      << "\",\"sensors\":" << cfg_.sensors << ",\"readings\":" << first.readings
      << ",\"insert_commands\":" << first.commands << ",\"seconds\":" << median(secs)
      << ",\"readings_per_s\":" << rate << ",\"round_rates\":[";
    for (size_t i = 0; i < rates.size(); ++i) j << (i ? "," : "") << rates[i];
    j << "]";
    if (s.target != Target::direct_flat)
      j << ",\"ratio_vs_flat\":" << vs << ",\"round_ratio_min\":" << range.first
        << ",\"round_ratio_max\":" << range.second;
    j << ",\"backend_statements\":" << first.statements << ",\"backend_docs\":" << first.backend_docs
      << ",\"p50_ms\":" << p50 << ",\"p99_ms\":" << p99
      << ",\"cpu_us_per_reading\":{\"client\":" << cpu_json(cpu_c) << ",\"remold\":" << cpu_json(cpu_r)
      << ",\"backend\":" << cpu_json(cpu_b) << "}" << ",\"errors\":" << errors
      << ",\"verified\":" << (verified ? "true" : "false") << ",\"load1\":" << load
      << ",\"cores\":" << usable_cores() << "}";
    json_lines.push_back(j.str());
  }
  std::printf("\n  readings/s = readings / wall seconds from the first insert to the last reply\n"
              "  (median over rounds). vs flat = remold-bucket readings/s / direct-flat readings/s\n"
              "  of the same order, insert size, ordered flag and threads; round range = its\n"
              "  lowest and highest value over single rounds (round i against round i): a\n"
              "  wide range means the machine was noisy. stmts/cmd = backend write\n"
              "  statements per client insert: flat, the documents; remold, the bucket upserts\n"
              "  its rewrite sends (computed from the rule's coalescing, not measured).\n"
              "  cpu us/reading = CPU time (user+system, all threads) during the timed part,\n"
              "  per reading: bench client / remold / backend (? = pid not given; remold's\n"
              "  is idle time only on direct-flat rows).\n"
              "  load = 1-minute load average at the end of the case (highest over rounds).\n\n");
  for (const auto& line : json_lines) std::printf("%s\n", line.c_str());
  std::fflush(stdout);

  // The issue's target: batched ingest through remold >= 2x direct flat batched.
  std::printf("\ntarget: batched ingest through remold >= 2x the readings/s of direct flat batched inserts\n");
  for (const auto& rounds : cases) {
    const CaseSpec& s = rounds.front().spec;
    if (s.mode != Mode::batch || s.target != Target::remold_bucket) continue;
    const auto flat = flat_rate.find({s.order, s.mode, s.ordered, s.threads});
    if (flat == flat_rate.end() || flat->second <= 0) continue;
    std::vector<double> rates;
    for (const auto& r : rounds) rates.push_back(r.rate());
    const double ratio = median(rates) / flat->second;
    const auto range = round_ratio_range(rounds, flat_rounds[{s.order, s.mode, s.ordered, s.threads}]);
    std::printf("  %-12s insertMany %d ordered:%-5s threads %d: %.0f vs %.0f readings/s = %.2fx "
                "(rounds %.2f-%.2f): %s\n",
                order_name(s.order), cfg_.batch, s.ordered ? "true" : "false", s.threads,
                median(rates), flat->second, ratio, range.first, range.second,
                ratio >= 2.0 ? "PASS" : "FAIL");
    std::printf("BENCH_JSON {\"bench\":\"bucket_target\",\"order\":\"%s\",\"per_insert\":%d,"
                "\"ordered\":%s,\"threads\":%d,\"remold_readings_per_s\":%.1f,"
                "\"flat_readings_per_s\":%.1f,\"ratio\":%.4f,\"target\":2.0,\"pass\":%s}\n",
                order_name(s.order), cfg_.batch, s.ordered ? "true" : "false", s.threads,
                median(rates), flat->second, ratio, ratio >= 2.0 ? "true" : "false");
  }
  std::fflush(stdout);
}

std::string size_text(double v) {
  if (v < 0) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}

void Bench::print_storage() {
  std::printf("\nstorage after loading %g days (%lld readings), as the backend reports it "
              "(collStats/dbStats, direct connection)\n",
              cfg_.days, static_cast<long long>(storage_[1].readings ? storage_[1].readings
                                                                      : storage_[0].readings));
  std::printf("%-13s %-29s %9s %11s %8s %11s %8s %11s %14s %13s\n", "target", "namespace",
              "documents", "data bytes", "avg obj", "storage", "indexes", "index size",
              "index entries", "db dataSize");
  for (int i : {0, 1}) {
    const StorageStats& st = storage_[i];
    if (!st.captured) continue;
    const double entries = st.documents >= 0 && st.nindexes >= 0 ? st.documents * st.nindexes : -1;
    std::printf("%-13s %-29s %9s %11s %8s %11s %8s %11s %14s %13s\n",
                target_name(i == 0 ? Target::remold_bucket : Target::direct_flat), st.ns.c_str(),
                size_text(st.documents).c_str(), size_text(st.data_size).c_str(),
                size_text(st.documents > 0 ? st.data_size / st.documents : -1).c_str(),
                size_text(st.storage_size).c_str(), size_text(st.nindexes).c_str(),
                size_text(st.index_size).c_str(), size_text(entries).c_str(),
                size_text(st.db_data_size).c_str());
  }
  const StorageStats& b = storage_[0];
  const StorageStats& f = storage_[1];
  if (b.captured && f.captured && f.documents > 0 && f.data_size > 0) {
    std::printf("  bucketed / flat: documents %.4fx (%.1f readings per bucket), data size %.3fx, "
                "index entries %.4fx\n", b.documents / f.documents,
                b.documents > 0 ? static_cast<double>(b.readings) / b.documents : 0,
                b.data_size / f.data_size,
                (b.documents * b.nindexes) / std::max(1.0, f.documents * f.nindexes));
  }
  if (b.captured) {
    bool found = false;
    for (const auto& index : b.indexes)
      found = found || index.find("\"sensor\" : 1, \"start\" : 1") != std::string::npos;
    if (!found)
      std::printf("  WARNING: %s has no {sensor: 1, start: 1} index: remold did not ensure its\n"
                  "  bucket index (it ensures it once per process; was the collection dropped\n"
                  "  while this remold ran?). Bucket upserts scan the collection without it.\n",
                  b.ns.c_str());
  }
  std::printf("  index entries = documents x indexes (computed, backend-independent). The\n"
              "  stand-in backend (mongo-java-server, in memory) reports size as the sum of\n"
              "  BSON document sizes, storageSize 0, and per-index numbers under 'indexSize'\n"
              "  that are not bytes (they look like entry counts; compound indexes show 0):\n"
              "  read its index size as approximate at best. A real mongod reports bytes.\n");
  for (int i : {0, 1}) {
    const StorageStats& st = storage_[i];
    if (!st.captured) continue;
    std::printf("  %s collStats: %s\n", st.ns.c_str(), st.coll_stats_json.c_str());
    std::printf("  %s dbStats: %s\n", st.ns.substr(0, st.ns.find('.')).c_str(),
                st.db_stats_json.c_str());
    for (const auto& index : st.indexes) std::printf("  %s index: %s\n", st.ns.c_str(), index.c_str());
  }
  for (int i : {0, 1}) {
    const StorageStats& st = storage_[i];
    if (!st.captured) continue;
    std::printf("BENCH_JSON {\"bench\":\"bucket_storage\",\"target\":\"%s\",\"ns\":\"%s\","
                "\"readings\":%lld,\"documents\":%.0f,\"data_size\":%.0f,\"storage_size\":%.0f,"
                "\"nindexes\":%.0f,\"index_size_reported\":%.0f,\"index_entries\":%.0f,"
                "\"db_data_size\":%.0f,\"db_index_size\":%.0f,\"collStats\":%s}\n",
                target_name(i == 0 ? Target::remold_bucket : Target::direct_flat), st.ns.c_str(),
                static_cast<long long>(st.readings), st.documents, st.data_size, st.storage_size,
                st.nindexes, st.index_size,
                st.documents >= 0 && st.nindexes >= 0 ? st.documents * st.nindexes : -1,
                st.db_data_size, st.db_index_size,
                st.coll_stats_json.empty() ? "null" : st.coll_stats_json.c_str());
  }
  std::fflush(stdout);
}

int Bench::run() {
  admin_direct_ = connect(cfg_.direct, "bucket_bench");
  admin_proxy_ = connect(cfg_.proxy, "bucket_bench");
  print_header();

  // Datasets, built before anything is timed.
  std::map<std::pair<Order, bool>, std::unique_ptr<Dataset>> data;  // (order, batched)
  for (Order o : cfg_.orders) {
    data[{o, true}] = make_dataset(o, cfg_.sensors, cfg_.days);
    data[{o, false}] = make_dataset(o, cfg_.sensors, cfg_.single_days);
  }

  // The case list: remold and flat of the same kind run back to back, in
  // alternating order (R F, F R, ...; reversed again every other round), so
  // drift and the backend's garbage collections hit both alike.
  std::vector<CaseSpec> specs;
  std::vector<std::vector<size_t>> groups;  // indexes into specs, one group per kind
  bool remold_first = true;
  auto add_pair = [&](Order o, Mode m, bool ordered, int threads) {
    CaseSpec r{o, m, ordered, threads, Target::remold_bucket};
    CaseSpec f{o, m, ordered, threads, Target::direct_flat};
    std::vector<size_t> group;
    for (const CaseSpec& spec : {remold_first ? r : f, remold_first ? f : r}) {
      group.push_back(specs.size());
      specs.push_back(spec);
    }
    if (cfg_.passthrough) {
      group.push_back(specs.size());
      specs.push_back({o, m, ordered, threads, Target::remold_flat});
    }
    groups.push_back(group);
    remold_first = !remold_first;
  };
  for (Order o : cfg_.orders) {
    for (int t : cfg_.threads) add_pair(o, Mode::single, false, t);
    for (int t : cfg_.batch_threads) {
      add_pair(o, Mode::batch, false, t);
      add_pair(o, Mode::batch, true, t);
    }
  }

  bool all_ok = true;
  if (cfg_.warmup_days > 0) {
    std::printf("warm-up (untimed, %g days time-major per target and mode)...\n", cfg_.warmup_days);
    auto warm = make_dataset(Order::time_major, cfg_.sensors, cfg_.warmup_days);
    std::vector<Target> targets{Target::remold_bucket, Target::direct_flat};
    if (cfg_.passthrough) targets.push_back(Target::remold_flat);
    for (Target t : targets) {
      for (Mode m : {Mode::single, Mode::batch}) {
        CaseResult r = run_case({Order::time_major, m, false, 1, t}, *warm, false);
        if (!r.verified) {
          std::printf("warm-up %s %s failed verification: %s\n", target_name(t),
                      m == Mode::single ? "one per insert" : "insertMany",
                      r.verify_message.c_str());
          if (t == Target::remold_bucket)
            std::printf("  is remold running with the rule shown above in its --rules directory?\n");
          return 1;
        }
      }
    }
  }

  std::printf("cases (round, order, insert, ordered, threads, target, readings, seconds, "
              "readings/s):\n");
  std::vector<std::vector<CaseResult>> results(specs.size());
  for (int round = 1; round <= cfg_.rounds; ++round) {
    std::vector<size_t> order;
    for (auto group : groups) {
      if (round % 2 == 0) std::reverse(group.begin(), group.end());
      order.insert(order.end(), group.begin(), group.end());
    }
    for (const size_t i : order) {
      const CaseSpec& s = specs[i];
      const Dataset& ds = *data.at({s.order, s.mode == Mode::batch});
      CaseResult r = run_case(s, ds, false);
      char tag[16];
      std::snprintf(tag, sizeof tag, "r%d", round);
      print_row(r, tag);
      all_ok = all_ok && r.verified;
      if (round == 1 && s.mode == Mode::batch && r.verified && s.target != Target::remold_flat)
        capture_storage(s.target, r.readings);
      results[i].push_back(std::move(r));
    }
  }

  print_summary(results);
  print_storage();
  if (!cfg_.keep) {
    reset(Target::remold_bucket);
    command(admin_direct_.get(), kFlatDb, json(R"({"drop": "readings"})").get(), true);
  }
  std::printf("\nload average after the run: %.2f\n", load_average());
  if (!all_ok) std::printf("some cases failed or did not verify (see above)\n");
  return all_ok ? 0 : 1;
}

}  // namespace
}  // namespace bucket_bench

int main(int argc, char** argv) {
  const auto cfg = bucket_bench::parse_args(argc, argv);
  return bench_common::run_main("bucket_bench", [&] { return bucket_bench::Bench(cfg).run(); });
}
