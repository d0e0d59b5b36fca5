// bucket_bench: readings/s ingested through remold's bucket rule against
// flat inserts sent directly to the backend, with the same client code in
// the same run; plus the storage each layout takes. The scaffolding
// (flags, header, connections, CPU, threads) is pattern_harness's.
//
// Contract:
//   - The flat side is bench_flat.readings on --direct, with a
//     {sensor: 1, at: 1} index, dropped and re-created before every case.
//   - The bucket collection is emptied with a direct delete before every
//     case, never dropped: remold ensures its bucket index once per process,
//     so a bucket collection dropped behind its back (directly on the
//     backend) would lose that index until remold restarts.
//   - Every case is verified afterwards through the direct connection
//     (document count; for buckets also the number of buckets, at most one
//     per thread where concurrent first upserts race, and the
//     count/sum/min/max summaries against the data sent) and, for the
//     bucket side, through remold (count on the logical collection).
//   - Prints a table and one "BENCH_JSON {...}" line per row (ingest rows,
//     storage rows, target rows); run() is true when every insert succeeded
//     and every case verified. The target (batched through remold >= 2x
//     direct flat batched) is reported, not enforced.
#include "bench_common.h"
#include "bench_mongoc.h"
#include "bench_report.h"
#include "client_threads.h"
#include "failures.h"
#include "collection_stats.h"
#include "pattern_harness.h"
#include "timed_rounds.h"

#include <bson/bson.h>
#include <mongoc/mongoc.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

namespace bucket_bench {
namespace {

using namespace bench_common;

constexpr const char* kBucketDb = "bench_bucket";
constexpr const char* kLogical = "readings";
constexpr const char* kBuckets = "readings_buckets";
constexpr const char* kFlatDb = "bench_flat";
constexpr const char* kFlat = "readings";
constexpr int64_t kT0Ms = 1704067200000;  // 2024-01-01T00:00:00Z, on an hour boundary
constexpr int64_t kSpanMs = 3'600'000;    // the rule's span: 1h
constexpr int kMinutesPerDay = 1440;

const char kRule[] =
    "namespace: bench_bucket.readings\n"
    "pattern: bucket\n"
    "bucket:\n"
    "  collection: readings_buckets\n"
    "  meta: [sensor]\n"
    "  time: at\n"
    "  span: 1h\n"
    "  summaries:\n"
    "    temp: [sum, min, max]\n";

const char kOptions[] =
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
    "                       remold and flat alternate which goes first\n"
    "  --passthrough        also insert flat readings through remold (no rule: its\n"
    "                       fast path), rows 'remold-flat', to separate the proxy\n"
    "                       hop from the bucket rewrite\n";

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

struct Options {
  int sensors = 10;
  double days = 7;           // data of the batched cases
  double single_days = 1;    // data of the one-reading-per-insert cases
  double warmup_days = 0.5;  // untimed, per target, before the first case
  int batch = 1000;
  std::vector<int> threads{1, 8};
  std::vector<int> batch_threads{1};
  std::vector<Order> orders{Order::time_major, Order::sensor_major};
  int rounds = 3;
  bool passthrough = false;
};

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

// ---- data ------------------------------------------------------------------

struct Dataset {
  Order order;
  Documents docs;
  std::vector<int64_t> bucket_key;  // per reading: sensor + hour, for coalescing
  double temp_sum = 0, temp_min = 0, temp_max = 0;
  int64_t buckets = 0;  // distinct (sensor, hour)
  size_t size() const { return docs.size(); }
};

// Deterministic temperature: a daily cycle, a per-sensor offset and noise,
// rounded to 0.01 degrees.
double temperature(int sensor, int64_t minute) {
  uint64_t h = static_cast<uint64_t>(sensor) * 0x9e3779b97f4a7c15ULL ^
               static_cast<uint64_t>(minute) * 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 31;
  const double noise = static_cast<double>(h % 1000) / 1000.0 - 0.5;
  const double t = 18.0 + 0.3 * sensor +
                   4.0 * std::sin(2 * M_PI * static_cast<double>(minute) / kMinutesPerDay) + noise;
  return std::round(t * 100.0) / 100.0;
}

int64_t readings_in(double days, int sensors) {
  return std::max<int64_t>(1, std::llround(days * kMinutesPerDay)) * sensors;
}

std::unique_ptr<Dataset> make_dataset(Order order, int sensors, double days) {
  auto ds = std::make_unique<Dataset>();
  ds->order = order;
  const int64_t minutes = std::max<int64_t>(1, std::llround(days * kMinutesPerDay));
  const int64_t n = minutes * sensors;
  ds->docs.reserve(n);
  ds->bucket_key.reserve(n);
  std::set<int64_t> keys;
  for (int64_t i = 0; i < n; ++i) {
    const bool time_major = order == Order::time_major;
    const int sensor = static_cast<int>(time_major ? i % sensors : i / minutes);
    const int64_t minute = time_major ? i / sensors : i % minutes;
    const double temp = temperature(sensor, minute);
    char name[32];
    std::snprintf(name, sizeof name, "sensor-%02d", sensor);
    bson_t* doc = bson_new();
    BSON_APPEND_UTF8(doc, "sensor", name);
    BSON_APPEND_DATE_TIME(doc, "at", kT0Ms + minute * 60'000);
    BSON_APPEND_DOUBLE(doc, "temp", temp);
    ds->docs.add(doc);
    const int64_t key = static_cast<int64_t>(sensor) * 1'000'000'000 + (minute * 60'000) / kSpanMs;
    ds->bucket_key.push_back(key);
    keys.insert(key);
    ds->temp_sum += temp;
    ds->temp_min = i == 0 ? temp : std::min(ds->temp_min, temp);
    ds->temp_max = i == 0 ? temp : std::max(ds->temp_max, temp);
  }
  ds->buckets = static_cast<int64_t>(keys.size());
  return ds;
}

// Backend write statements remold sends for these inserts, mirroring
// patterns/bucket/insert.cc: one upsert per bucket per insert command,
// ordered or not (the driver gives every reading an _id of its own).
int64_t bucket_statements(const Dataset& ds, size_t per_insert) {
  int64_t total = 0;
  for (size_t start = 0; start < ds.size(); start += per_insert) {
    const size_t end = std::min(ds.size(), start + per_insert);
    std::set<int64_t> keys(ds.bucket_key.begin() + start, ds.bucket_key.begin() + end);
    total += static_cast<int64_t>(keys.size());
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

// Cases of one kind: remold and flat of the same order, mode and threads.
struct Kind {
  Order order;
  Mode mode;
  bool ordered;
  int threads;
  bool operator<(const Kind& o) const {
    return std::tie(order, mode, ordered, threads) < std::tie(o.order, o.mode, o.ordered, o.threads);
  }
};
Kind kind_of(const CaseSpec& s) { return {s.order, s.mode, s.ordered, s.threads}; }

std::string mode_text(const CaseSpec& s, int batch) {
  if (s.mode == Mode::single) return "one per insert";
  return "insertMany " + std::to_string(batch);
}

const char* ordered_text(const CaseSpec& s) {
  return s.mode == Mode::single ? "-" : (s.ordered ? "true" : "false");
}

struct CaseResult {
  CaseSpec spec;
  ThreadsRun run;  // tally: readings inserted (done), latency per insert command (ms)
  int64_t commands = 0;
  bool verified = false;
  std::string verify_message;
  std::string note;  // said of a verified case
  int64_t backend_docs = 0;
  int64_t statements = 0;  // backend write statements (computed)
  int64_t readings() const { return run.tally.done; }
  double rate() const { return run.seconds > 0 ? static_cast<double>(readings()) / run.seconds : 0; }
};

struct Storage {
  bool captured = false;
  int64_t readings = 0;
  CollectionStats stats;
};

class BucketScenario : public PatternScenario {
 public:
  const char* program() const override { return "bucket_bench"; }
  const char* rule() const override { return kRule; }
  const char* options() const override { return kOptions; }
  std::vector<std::string_view> switches() const override { return {"--passthrough"}; }
  bool set_option(const std::string& flag, const std::string& value) override;
  void describe() const override;
  bool run(Harness& h) override;
  void clean_up(Harness& h) override;

 private:
  void reset(Harness& h, Target target);
  CaseResult run_case(Harness& h, const CaseSpec& spec, const Dataset& ds);
  void verify(Harness& h, CaseResult& r, const Dataset& ds);
  void print_row(const CaseResult& r, int round) const;
  void print_summary(const std::vector<std::vector<CaseResult>>& cases) const;
  void print_storage() const;

  Options opt_;
  Storage storage_[2];  // remold-bucket, direct-flat
};

bool BucketScenario::set_option(const std::string& flag, const std::string& value) {
  auto int_arg = [&](int lo, int hi) { return static_cast<int>(parse_int(flag, value, lo, hi)); };
  if (flag == "--passthrough") opt_.passthrough = true;
  else if (flag == "--sensors") opt_.sensors = int_arg(1, 100000);
  else if (flag == "--days") opt_.days = parse_number(flag, value);
  else if (flag == "--single-days") opt_.single_days = parse_number(flag, value);
  else if (flag == "--warmup-days") opt_.warmup_days = parse_number(flag, value, true);
  else if (flag == "--batch") opt_.batch = int_arg(1, 100000);
  else if (flag == "--threads") opt_.threads = parse_count_list(flag, value, 256);
  else if (flag == "--batch-threads") opt_.batch_threads = parse_count_list(flag, value, 256);
  else if (flag == "--orders") opt_.orders = parse_orders(value);
  else if (flag == "--rounds") opt_.rounds = int_arg(1, 100);
  else return false;
  return true;
}

void BucketScenario::describe() const {
  std::printf("  bucketed: bench_bucket.readings through remold, stored in "
              "bench_bucket.readings_buckets\n");
  std::printf("  flat: bench_flat.readings on the backend directly, index {sensor: 1, at: 1}\n");
  std::printf("  data: %d sensors, one reading per minute, {sensor: \"sensor-NN\", at: Date, "
              "temp: double}\n", opt_.sensors);
  std::printf("    batched cases: %g days = %lld readings; one-per-insert cases: %g days = "
              "%lld readings\n", opt_.days,
              static_cast<long long>(readings_in(opt_.days, opt_.sensors)), opt_.single_days,
              static_cast<long long>(readings_in(opt_.single_days, opt_.sensors)));
  std::printf("    time-major: minute by minute, all sensors each minute (how a fleet reports);\n"
              "    sensor-major: one sensor's whole range, then the next (a backfill)\n");
  std::printf("  clients: one mongoc_client_t (one connection) per thread, insert_one /\n"
              "    insert_many; the driver adds an ObjectId _id to every reading, which the\n"
              "    bucket rule keeps inside each measurement. Threads share one cursor over\n"
              "    the readings, so concurrent inserts stay in the data's order.\n");
  if (opt_.passthrough)
    std::printf("  remold-flat rows: the flat inserts sent through remold (no rule for\n"
                "    bench_flat.readings, so its byte-for-byte fast path)\n");
  std::printf("  every case starts empty and is verified afterwards; %d round(s), median shown;\n"
              "  %.2g days of untimed warm-up per target and mode first\n", opt_.rounds,
              opt_.warmup_days);
}

// Empties the target's collection: flat is dropped and its index re-created;
// the bucket collection is emptied with a delete, keeping remold's index.
void BucketScenario::reset(Harness& h, Target target) {
  mongoc_client_t* direct = h.admin(Via::direct);
  if (is_flat(target)) {
    command(direct, kFlatDb, json(R"({"drop": "readings"})").get(), true);
    command(direct, kFlatDb,
            json(R"({"createIndexes": "readings", "indexes": [{"key": {"sensor": 1, "at": 1},
                     "name": "sensor_1_at_1"}]})").get());
  } else {
    delete_all(direct, kBucketDb, kBuckets);
  }
}

CaseResult BucketScenario::run_case(Harness& h, const CaseSpec& spec, const Dataset& ds) {
  reset(h, spec.target);
  CaseResult result;
  result.spec = spec;
  const Via via = spec.target == Target::direct_flat ? Via::direct : Via::remold;
  const char* db = spec.target == Target::remold_bucket ? kBucketDb : kFlatDb;
  const char* coll = spec.target == Target::remold_bucket ? kLogical : kFlat;
  const size_t per_insert = spec.mode == Mode::single ? 1 : static_cast<size_t>(opt_.batch);
  const size_t units = (ds.size() + per_insert - 1) / per_insert;

  // Threads take the next reading (or batch) from one shared cursor.
  std::atomic<size_t> next{0};
  auto prepare = [&](mongoc_client_t* client, int) -> Operation {
    SharedCollection collection = shared_collection(client, db, coll);
    std::shared_ptr<bson_t> opts(
        json(spec.ordered ? R"({"ordered": true})" : R"({"ordered": false})").release(),
        bson_destroy);
    return [&, collection, opts](Tally& tally) {
      const size_t unit = next.fetch_add(1, std::memory_order_relaxed);
      if (unit >= units) return false;
      const size_t begin = unit * per_insert;
      const size_t count = std::min(per_insert, ds.size() - begin);
      const auto start = Clock::now();
      InsertResult inserted;
      if (spec.mode == Mode::single) {
        bson_error_t error;
        inserted.ok = mongoc_collection_insert_one(collection.get(), ds.docs[begin], nullptr,
                                                   nullptr, &error);
        inserted.inserted = inserted.ok ? 1 : 0;
        if (!inserted.ok) inserted.error = error.message;
      } else {
        inserted = insert_many(collection.get(), ds.docs.data() + begin, count, opts.get());
      }
      tally.ms.push_back(ms_since(start));
      tally.done += inserted.inserted;
      if (!inserted.ok) tally.failures.add(inserted.error);
      return true;
    };
  };
  result.run = run_client_threads(h.connect(via, spec.threads), h.cpu(), std::nullopt, prepare);
  result.commands = static_cast<int64_t>(units);
  result.statements = spec.target == Target::remold_bucket
                          ? bucket_statements(ds, per_insert)
                          : static_cast<int64_t>(ds.size());
  // Only fully inserted cases count as throughput; a failed insert makes the
  // row an error row.
  verify(h, result, ds);
  if (result.run.tally.failures.count)
    std::fprintf(stderr, "bucket_bench: %s %s: %s\n", target_name(spec.target),
                 mode_text(spec, opt_.batch).c_str(), result.run.tally.failures.text("inserts").c_str());
  return result;
}

void BucketScenario::verify(Harness& h, CaseResult& r, const Dataset& ds) {
  mongoc_client_t* direct = h.admin(Via::direct);
  const int64_t expected = static_cast<int64_t>(ds.size());
  std::ostringstream msg;
  bool ok = r.readings() == expected && r.run.tally.failures.count == 0;
  if (r.readings() != expected) msg << "inserted " << r.readings() << " of " << expected << "; ";
  if (is_flat(r.spec.target)) {
    std::string error;
    r.backend_docs = count_all(direct, kFlatDb, "readings", &error);
    if (r.backend_docs != expected) {
      ok = false;
      msg << "backend has " << r.backend_docs << " flat documents, expected " << expected
          << (error.empty() ? "" : " (" + error + ")") << "; ";
    }
    r.verified = ok;
    r.verify_message = msg.str();
    return;
  }
  auto pipeline = json(R"({"aggregate": "readings_buckets", "cursor": {}, "pipeline": [
      {"$group": {"_id": null, "buckets": {"$sum": 1}, "n": {"$sum": "$count"},
                  "s": {"$sum": "$sum.temp"}, "mn": {"$min": "$min.temp"},
                  "mx": {"$max": "$max.temp"}}}]})");
  auto reply = command(direct, kBucketDb, pipeline.get());
  auto at = [&](const char* f) {
    return number_at(reply.get(), (std::string("cursor.firstBatch.0.") + f).c_str()).value_or(-1);
  };
  r.backend_docs = static_cast<int64_t>(at("buckets"));
  const auto n = static_cast<int64_t>(at("n"));
  const double s = at("s"), mn = at("mn"), mx = at("mx");
  // Concurrent writers may each insert a bucket not stored yet (an upsert
  // without a unique index, as MongoDB's own): with T threads a bucket may
  // be split in up to T documents, every reading still in exactly one
  // (the counts and summaries below say so).
  const int64_t most_buckets = ds.buckets * std::max(1, r.spec.threads);
  if (r.backend_docs < ds.buckets || r.backend_docs > most_buckets) {
    ok = false;
    msg << "backend has " << r.backend_docs << " buckets, expected " << ds.buckets
        << (most_buckets > ds.buckets ? " to " + std::to_string(most_buckets) : "") << "; ";
  } else if (r.backend_docs > ds.buckets) {
    r.note = std::to_string(r.backend_docs) + " buckets for " + std::to_string(ds.buckets) +
             " (first upserts raced)";
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
  auto count = command(h.admin(Via::remold), kBucketDb, json(R"({"count": "readings"})").get(), true);
  const auto logical = static_cast<int64_t>(number_at(count.get(), "n").value_or(-1));
  if (logical != expected) {
    ok = false;
    msg << "count through remold says " << logical << ", expected " << expected
        << " (reply " << to_json(count.get()) << "); ";
  }
  r.verified = ok;
  r.verify_message = msg.str();
}

void BucketScenario::print_row(const CaseResult& r, int round) const {
  std::printf("  r%-5d %-12s %-16s %-5s %3d %-13s %8lld %8.2f %10.0f %s%s\n", round,
              order_name(r.spec.order), mode_text(r.spec, opt_.batch).c_str(), ordered_text(r.spec),
              r.spec.threads, target_name(r.spec.target), static_cast<long long>(r.readings()),
              r.run.seconds, r.rate(), r.verified ? "ok " : "NOT VERIFIED: ",
              r.verified ? r.note.c_str() : r.verify_message.c_str());
  std::fflush(stdout);
}

std::vector<double> rates_of(const std::vector<CaseResult>& rounds) {
  std::vector<double> rates;
  for (const auto& r : rounds) rates.push_back(r.rate());
  return rates;
}

std::string range_text(const std::optional<std::pair<double, double>>& range) {
  if (!range) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f-%.2f", range->first, range->second);
  return buf;
}

void BucketScenario::print_summary(const std::vector<std::vector<CaseResult>>& cases) const {
  // cases: one vector per case spec (all rounds), in run order.
  std::map<Kind, std::vector<double>> flat_rounds;  // per-round rates of direct-flat
  for (const auto& rounds : cases)
    if (rounds.front().spec.target == Target::direct_flat)
      flat_rounds[kind_of(rounds.front().spec)] = rates_of(rounds);
  auto flat_rate = [&](const CaseSpec& s) {
    const auto flat = flat_rounds.find(kind_of(s));
    return flat == flat_rounds.end() ? 0.0 : median(flat->second);
  };

  std::printf("\n%-12s %-16s %-5s %3s %-13s %8s %8s %10s %7s %11s %9s %15s %17s %6s %5s\n",
              "order", "insert", "ord", "thr", "target", "readings", "seconds", "readings/s",
              "vs flat", "round range", "stmts/cmd", "p50/p99 ms/cmd", "cpu us/reading", "errors",
              "load");
  std::vector<JsonObject> json_rows;
  for (const auto& rounds : cases) {
    const CaseResult& first = rounds.front();
    const CaseSpec& s = first.spec;
    std::vector<double> secs, lat, cpu_c, cpu_r, cpu_b;
    uint64_t errors = 0;
    bool verified = true;
    double load = 0;
    for (const auto& r : rounds) {
      secs.push_back(r.run.seconds);
      lat.insert(lat.end(), r.run.tally.ms.begin(), r.run.tally.ms.end());
      errors += r.run.tally.failures.count;
      verified = verified && r.verified;
      load = std::max(load, r.run.load);
      const double n = static_cast<double>(std::max<int64_t>(1, r.readings()));
      if (r.run.cpu.client >= 0) cpu_c.push_back(r.run.cpu.client * 1e6 / n);
      if (r.run.cpu.remold >= 0) cpu_r.push_back(r.run.cpu.remold * 1e6 / n);
      if (r.run.cpu.backend >= 0) cpu_b.push_back(r.run.cpu.backend * 1e6 / n);
    }
    auto cpu_median = [](const std::vector<double>& v) { return v.empty() ? -1 : median(v); };
    const std::string cpu = fixed_or_unknown(cpu_median(cpu_c), 1) + "/" +
                            fixed_or_unknown(cpu_median(cpu_r), 1) + "/" +
                            fixed_or_unknown(cpu_median(cpu_b), 1);
    const std::vector<double> rates = rates_of(rounds);
    const double rate = median(rates);
    const double flat = flat_rate(s);
    const double vs = flat > 0 ? rate / flat : 0;
    const double stmts = static_cast<double>(first.statements) / static_cast<double>(first.commands);
    const double p50 = percentile(lat, 0.50), p99 = percentile(lat, 0.99);
    const auto range = ratio_range(rates, flat_rounds[kind_of(s)]);
    const bool compared = s.target != Target::direct_flat;
    char vs_text[16] = "-", lat_text[32];
    if (compared) std::snprintf(vs_text, sizeof vs_text, "%.2fx", vs);
    std::snprintf(lat_text, sizeof lat_text, "%.2f/%.2f", p50, p99);
    std::printf("%-12s %-16s %-5s %3d %-13s %8lld %8.2f %10.0f %7s %11s %9.1f %15s %17s %6llu %5.2f%s\n",
                order_name(s.order), mode_text(s, opt_.batch).c_str(), ordered_text(s), s.threads,
                target_name(s.target), static_cast<long long>(first.readings()), median(secs), rate,
                vs_text, compared ? range_text(range).c_str() : "-", stmts, lat_text, cpu.c_str(),
                static_cast<unsigned long long>(errors), load, verified ? "" : "  NOT VERIFIED");
    JsonObject row;
    row.add("bench", "bucket_ingest").add("order", order_name(s.order))
        .add("insert", s.mode == Mode::single ? "one" : "many")
        .add("per_insert", s.mode == Mode::single ? 1 : opt_.batch)
        .raw("ordered", s.mode == Mode::single ? "null" : (s.ordered ? "true" : "false"))
        .add("threads", s.threads).add("target", target_name(s.target))
        .add("sensors", opt_.sensors).add("readings", first.readings())
        .add("insert_commands", first.commands).add("seconds", median(secs))
        .add("readings_per_s", rate).raw("round_rates", json_array(rates));
    if (compared)
      row.add("ratio_vs_flat", vs)
          .raw("round_ratio_min", range ? number_or_null(range->first, "%g") : "null")
          .raw("round_ratio_max", range ? number_or_null(range->second, "%g") : "null");
    auto cpu_json = [&](const std::vector<double>& v) { return number_or_null(cpu_median(v), "%.2f"); };
    row.add("backend_statements", first.statements).add("backend_docs", first.backend_docs)
        .add("p50_ms", p50).add("p99_ms", p99)
        .raw("cpu_us_per_reading", JsonObject()
                                       .raw("client", cpu_json(cpu_c))
                                       .raw("remold", cpu_json(cpu_r))
                                       .raw("backend", cpu_json(cpu_b))
                                       .str())
        .add("errors", errors).add("verified", verified).add("load1", load)
        .add("cores", usable_cores());
    json_rows.push_back(row);
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
  for (const auto& row : json_rows) print_bench_json(row);
  std::fflush(stdout);

  // The issue's target: batched ingest through remold >= 2x direct flat batched.
  std::printf("\ntarget: batched ingest through remold >= 2x the readings/s of direct flat batched inserts\n");
  for (const auto& rounds : cases) {
    const CaseSpec& s = rounds.front().spec;
    const double flat = flat_rate(s);
    if (s.mode != Mode::batch || s.target != Target::remold_bucket || flat <= 0) continue;
    const std::vector<double> rates = rates_of(rounds);
    const double ratio = median(rates) / flat;
    const auto range = ratio_range(rates, flat_rounds[kind_of(s)]);
    std::printf("  %-12s insertMany %d ordered:%-5s threads %d: %.0f vs %.0f readings/s = %.2fx "
                "(rounds %s): %s\n",
                order_name(s.order), opt_.batch, s.ordered ? "true" : "false", s.threads,
                median(rates), flat, ratio, range_text(range).c_str(), ratio >= 2.0 ? "PASS" : "FAIL");
    print_bench_json(JsonObject()
                         .add("bench", "bucket_target").add("order", order_name(s.order))
                         .add("per_insert", opt_.batch).add("ordered", s.ordered)
                         .add("threads", s.threads)
                         .raw("remold_readings_per_s", number_or_null(median(rates), "%.1f"))
                         .raw("flat_readings_per_s", number_or_null(flat, "%.1f"))
                         .raw("ratio", number_or_null(ratio, "%.4f")).raw("target", "2.0")
                         .add("pass", ratio >= 2.0));
  }
  std::fflush(stdout);
}

std::string size_text(double v) {
  if (v < 0) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}

double index_entries(const CollectionStats& st) {
  return st.documents >= 0 && st.nindexes >= 0 ? st.documents * st.nindexes : -1;
}

const char* storage_target(int i) {
  return target_name(i == 0 ? Target::remold_bucket : Target::direct_flat);
}

void BucketScenario::print_storage() const {
  std::printf("\nstorage after loading %g days (%lld readings), as the backend reports it "
              "(collStats/dbStats, direct connection)\n",
              opt_.days, static_cast<long long>(storage_[1].readings ? storage_[1].readings
                                                                      : storage_[0].readings));
  std::printf("%-13s %-29s %9s %11s %8s %11s %8s %11s %14s %13s\n", "target", "namespace",
              "documents", "data bytes", "avg obj", "storage", "indexes", "index size",
              "index entries", "db dataSize");
  for (int i : {0, 1}) {
    if (!storage_[i].captured) continue;
    const CollectionStats& st = storage_[i].stats;
    std::printf("%-13s %-29s %9s %11s %8s %11s %8s %11s %14s %13s\n", storage_target(i),
                st.ns.c_str(), size_text(st.documents).c_str(), size_text(st.data_size).c_str(),
                size_text(st.documents > 0 ? st.data_size / st.documents : -1).c_str(),
                size_text(st.storage_size).c_str(), size_text(st.nindexes).c_str(),
                size_text(st.index_size).c_str(), size_text(index_entries(st)).c_str(),
                size_text(st.db_data_size).c_str());
  }
  const CollectionStats& b = storage_[0].stats;
  const CollectionStats& f = storage_[1].stats;
  if (storage_[0].captured && storage_[1].captured && f.documents > 0 && f.data_size > 0) {
    std::printf("  bucketed / flat: documents %.4fx (%.1f readings per bucket), data size %.3fx, "
                "index entries %.4fx\n", b.documents / f.documents,
                b.documents > 0 ? static_cast<double>(storage_[0].readings) / b.documents : 0,
                b.data_size / f.data_size,
                (b.documents * b.nindexes) / std::max(1.0, f.documents * f.nindexes));
  }
  if (storage_[0].captured) {
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
    if (!storage_[i].captured) continue;
    const CollectionStats& st = storage_[i].stats;
    std::printf("  %s collStats: %s\n", st.ns.c_str(), st.coll_stats_json.c_str());
    std::printf("  %s dbStats: %s\n", st.ns.substr(0, st.ns.find('.')).c_str(),
                st.db_stats_json.c_str());
    for (const auto& index : st.indexes) std::printf("  %s index: %s\n", st.ns.c_str(), index.c_str());
  }
  for (int i : {0, 1}) {
    if (!storage_[i].captured) continue;
    const CollectionStats& st = storage_[i].stats;
    auto whole = [](double v) { return number_or_null(v, "%.0f"); };
    print_bench_json(JsonObject()
                         .add("bench", "bucket_storage").add("target", storage_target(i))
                         .add("ns", st.ns).add("readings", storage_[i].readings)
                         .raw("documents", whole(st.documents)).raw("data_size", whole(st.data_size))
                         .raw("storage_size", whole(st.storage_size))
                         .raw("nindexes", whole(st.nindexes))
                         .raw("index_size_reported", whole(st.index_size))
                         .raw("index_entries", whole(index_entries(st)))
                         .raw("db_data_size", whole(st.db_data_size))
                         .raw("db_index_size", whole(st.db_index_size))
                         .raw("collStats", st.coll_stats_json.empty() ? "null" : st.coll_stats_json));
  }
  std::fflush(stdout);
}

bool BucketScenario::run(Harness& h) {
  // Datasets, built before anything is timed.
  std::map<std::pair<Order, bool>, std::unique_ptr<Dataset>> data;  // (order, batched)
  for (Order o : opt_.orders) {
    data[{o, true}] = make_dataset(o, opt_.sensors, opt_.days);
    data[{o, false}] = make_dataset(o, opt_.sensors, opt_.single_days);
  }

  // The case list, in groups of one kind: remold and flat run back to back,
  // in ABBA order, so drift and the backend's garbage collections hit both
  // alike.
  std::vector<CaseSpec> specs;
  std::vector<std::vector<size_t>> groups;  // indexes into specs
  auto add_group = [&](Order o, Mode m, bool ordered, int threads) {
    std::vector<size_t> group;
    std::vector<Target> targets{Target::remold_bucket, Target::direct_flat};
    if (opt_.passthrough) targets.push_back(Target::remold_flat);
    for (Target t : targets) {
      group.push_back(specs.size());
      specs.push_back({o, m, ordered, threads, t});
    }
    groups.push_back(group);
  };
  for (Order o : opt_.orders) {
    for (int t : opt_.threads) add_group(o, Mode::single, false, t);
    for (int t : opt_.batch_threads) {
      add_group(o, Mode::batch, false, t);
      add_group(o, Mode::batch, true, t);
    }
  }

  if (opt_.warmup_days > 0) {
    std::printf("warm-up (untimed, %g days time-major per target and mode)...\n", opt_.warmup_days);
    auto warm = make_dataset(Order::time_major, opt_.sensors, opt_.warmup_days);
    std::vector<Target> targets{Target::remold_bucket, Target::direct_flat};
    if (opt_.passthrough) targets.push_back(Target::remold_flat);
    for (Target t : targets) {
      for (Mode m : {Mode::single, Mode::batch}) {
        CaseResult r = run_case(h, {Order::time_major, m, false, 1, t}, *warm);
        if (!r.verified) {
          std::printf("warm-up %s %s failed verification: %s\n", target_name(t),
                      m == Mode::single ? "one per insert" : "insertMany",
                      r.verify_message.c_str());
          if (t == Target::remold_bucket)
            std::printf("  is remold running with the rule shown above in its --rules directory?\n");
          return false;
        }
      }
    }
  }

  std::printf("cases (round, order, insert, ordered, threads, target, readings, seconds, "
              "readings/s):\n");
  bool all_ok = true;
  std::vector<std::vector<CaseResult>> results(specs.size());
  for (int round = 1; round <= opt_.rounds; ++round) {
    for (const size_t i : abba_round(groups, round - 1)) {
      const CaseSpec& s = specs[i];
      CaseResult r = run_case(h, s, *data.at({s.order, s.mode == Mode::batch}));
      print_row(r, round);
      all_ok = all_ok && r.verified;
      const int slot = s.target == Target::remold_bucket ? 0 : 1;
      if (round == 1 && s.mode == Mode::batch && r.verified && s.target != Target::remold_flat &&
          !storage_[slot].captured) {
        storage_[slot] = {true, r.readings(),
                          collection_stats(h.admin(Via::direct), slot == 0 ? kBucketDb : kFlatDb,
                                           slot == 0 ? kBuckets : kFlat)};
      }
      results[i].push_back(std::move(r));
    }
  }

  print_summary(results);
  print_storage();
  return all_ok;
}

void BucketScenario::clean_up(Harness& h) {
  reset(h, Target::remold_bucket);
  command(h.admin(Via::direct), kFlatDb, json(R"({"drop": "readings"})").get(), true);
}

}  // namespace
}  // namespace bucket_bench

int main(int argc, char** argv) {
  bucket_bench::BucketScenario scenario;
  return bench_common::run_pattern_bench(argc, argv, scenario);
}
