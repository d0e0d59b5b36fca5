// extended_reference_bench: what remold's extended reference rule (synced)
// saves and costs, against the application doing the same work itself
// directly on the backend, with the same client code in the same run. The
// scaffolding (flags, header, connections, CPU, threads, rounds) is
// pattern_harness's.
//
//   (a) read, "the order view": one findOne of an order, which holds its
//       customer's copy {_id, name, shippingAddress} (through remold, and
//       directly), against the application's own way without the pattern:
//       aggregate [{$match: {_id}}, {$lookup: {from: customers, localField:
//       customerId, foreignField: _id, as: customer}}] on the orders,
//       directly.
//   (b) insert: one order inserted through remold (remold reads its
//       customer, inserts the order with the copy, then reads the customer
//       again), against the application's own writes sent directly: the
//       order alone (no copy), and, as a second baseline, findOne of the
//       customer then the order with the copy. Closed loop, 1 and 8 client
//       threads.
//   (c) fan-out: a customer's name updated through remold (remold updates
//       it, then syncs the copy on every order of the customer) against the
//       same update of the customer alone, directly; for customers with 10
//       and with 1,000 orders. Latency of the client's update call.
//
// Contract:
//   - The remold side is bench_extref.{customers,orders}; the direct side
//     is bench_extref_direct.{customers,orders}. Both are seeded directly on
//     the backend (never through remold) with the same customers and orders
//     (10,000 and 100,000 by default), the remold side's orders with the
//     copy the bench computes, the direct side's without (the application
//     without the pattern), and a {customerId: 1} index on the orders.
//     Nothing is reseeded between cases: inserted orders accumulate.
//   - Checks, on the backend directly: every side's read answer for sample
//     orders against the generated documents (byte for byte) before timing,
//     and every timed read finds its order with its customer; after every
//     insert case, the orders the case inserted (an ObjectId _id range) are
//     exactly those acknowledged, with their customerId, holding the copy of
//     their customer as stored now (remold, read+insert) or no copy
//     (direct), and the order count; after every fan-out cell, the updated
//     customers' names on both sides and the copies of all their orders; at
//     the end, every order of the remold side holds the copy of its
//     customer as stored now. A mismatch makes run() false (exit 1).
//   - Prints three tables, the final check and one "BENCH_JSON {...}" line
//     per row; run() is true when every operation succeeded and every check
//     passed.
#include "batch_load.h"
#include "bench_common.h"
#include "bench_mongoc.h"
#include "bson_fields.h"
#include "bench_report.h"
#include "client_threads.h"
#include "failures.h"
#include "pattern_harness.h"
#include "read_rounds.h"
#include "timed_rounds.h"
#include "write_rounds.h"

#include <bson/bson.h>
#include <mongoc/mongoc.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <ctime>
#include <cstdio>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace extended_reference_bench {
namespace {

using namespace bench_common;

constexpr const char* kRuledDb = "bench_extref";
constexpr const char* kDirectDb = "bench_extref_direct";
constexpr const char* kInto = "customer";         // the rule's `into`
constexpr const char* kReference = "customerId";  // the rule's `reference`
constexpr int64_t kT0Ms = 1704067200000;          // 2024-01-01T00:00:00Z
constexpr int64_t kOrderStepMs = 60 * 1000;       // seeded order j is at kT0Ms + j minutes

const char kRule[] =
    "namespace: bench_extref.orders\n"
    "pattern: extended_reference\n"
    "extended_reference:\n"
    "  reference: customerId\n"
    "  referenced: customers\n"
    "  into: customer\n"
    "  fields: [name, shippingAddress]\n"
    "  mode: synced\n"
    "  missing: error\n";

const char kOptions[] =
    "  --only read|insert|fanout  run one part (default all three; the final check always runs)\n"
    "  --customers N        customers seeded on each side (default 10000)\n"
    "  --orders N           orders seeded on each side (default 100000)\n"
    "  --fanout 10,1000     orders per customer in the fan-out cells (default 10,1000)\n"
    "  --fanout-customers 20,5  customers per fan-out cell, each seeded with exactly that\n"
    "                       many orders (one count per --fanout entry, or one for all;\n"
    "                       default 20,5); the other orders go round-robin to the others\n"
    "  --batch N            documents per insertMany while seeding (default 1000)\n"
    "  --read-seconds S     timed seconds of the read cell, at least (default 3)\n"
    "  --min-reads N        timed rounds (one read per side), at least (default 100)\n"
    "  --max-reads N        and at most (default 5000)\n"
    "  --max-read-seconds S stop slow reads after S seconds, once there are 10 rounds\n"
    "                       (default 20)\n"
    "  --read-warmup N      untimed reads per side (default 20)\n"
    "  --read-checks N      orders whose every side's answer is checked before timing\n"
    "                       (default 50)\n"
    "  --clients 1,8        client threads of the insert cases (default 1,8)\n"
    "  --seconds S          timed seconds per insert case and round (default 2)\n"
    "  --rounds N           insert rounds; remold, direct and read+insert run back to back,\n"
    "                       the order swapping; the table shows the median (default 3)\n"
    "  --warmup S           untimed seconds of inserts per side first (default 2)\n"
    "  --fanout-seconds S   timed seconds per fan-out cell, at least (default 3)\n"
    "  --min-updates N      timed rounds (one update per side) per fan-out cell, at least\n"
    "                       (default 10)\n"
    "  --max-updates N      and at most (default 2000)\n"
    "  --max-fanout-seconds S  stop a cell of slow updates after S seconds, once it has 5\n"
    "                       rounds (default 20)\n"
    "  --fanout-warmup N    untimed updates per side per fan-out cell (default 1)\n";

struct Options {
  bool run_read = true;
  bool run_insert = true;
  bool run_fanout = true;
  int64_t customers = 10'000;
  int64_t orders = 100'000;
  std::vector<int64_t> fanout{10, 1000};           // orders per customer, per fan-out cell
  std::vector<int64_t> fanout_customers{20, 5};    // customers per fan-out cell (one per cell, or one)
  int batch = 1000;
  ReadSchedule reads;  // read_rounds.h's defaults
  int read_checks = 50;
  WriteSchedule inserts{.clients = {1, 8}, .rounds = 3, .seconds = 2, .warmup = 2};  // write_rounds.h
  RoundLimits updates{.min_rounds = 10, .max_rounds = 2000, .seconds = 3, .max_seconds = 20,
                      .rounds_before_cutoff = 5};
  int fanout_warmup = 1;

  int64_t customers_for(size_t cell) const {
    return fanout_customers.size() == 1 ? fanout_customers[0] : fanout_customers[cell];
  }
};

// ---- documents ---------------------------------------------------------------

std::optional<std::string> utf8_at(const bson_t* doc, const char* key) {
  bson_iter_t it;
  if (!bson_iter_init_find(&it, doc, key) || !BSON_ITER_HOLDS_UTF8(&it)) return std::nullopt;
  uint32_t len = 0;
  const char* s = bson_iter_utf8(&it, &len);
  return std::string(s, len);
}

// The document at `key` (a copy), nullptr when missing or not a document.
BsonPtr document_at(const bson_t* doc, const char* key) {
  bson_iter_t it;
  if (!bson_iter_init_find(&it, doc, key) || !BSON_ITER_HOLDS_DOCUMENT(&it)) return nullptr;
  uint32_t len = 0;
  const uint8_t* data = nullptr;
  bson_iter_document(&it, &len, &data);
  return BsonPtr(bson_new_from_data(data, len));
}

bool has_field(const bson_t* doc, const char* key) { return bson_has_field(doc, key); }

std::string oid_key(const bson_oid_t& id) { return std::string(reinterpret_cast<const char*>(id.bytes), 12); }


const char* const kCities[] = {"Springfield", "Riverton", "Lakeside", "Fairview", "Georgetown",
                               "Franklin", "Clinton", "Madison", "Salem", "Oakland"};
const char* const kStreets[] = {"Main Street", "Oak Avenue", "Maple Road", "Cedar Lane", "Elm Street",
                                "Pine Court", "Hill Road", "Lake Drive"};
const char* const kTiers[] = {"bronze", "silver", "gold"};
const char* const kStatuses[] = {"placed", "paid", "shipped", "delivered"};

std::string customer_name(int64_t id) {
  char name[48];
  std::snprintf(name, sizeof name, "Customer %06lld", static_cast<long long>(id));
  return name;
}

void append_address(bson_t* doc, const char* key, int64_t seed) {
  bson_t a;
  bson_append_document_begin(doc, key, -1, &a);
  char street[64], zip[16];
  std::snprintf(street, sizeof street, "%lld %s", static_cast<long long>(1 + seed % 997),
                kStreets[seed % 8]);
  std::snprintf(zip, sizeof zip, "%05lld", static_cast<long long>((seed * 7919) % 100000));
  BSON_APPEND_UTF8(&a, "street", street);
  BSON_APPEND_UTF8(&a, "city", kCities[(seed / 7) % 10]);
  BSON_APPEND_UTF8(&a, "zip", zip);
  BSON_APPEND_UTF8(&a, "country", "US");
  bson_append_document_end(doc, &a);
}

// Customer i, a pure function of i: {_id, name, email, phone,
// shippingAddress: {street, city, zip, country}, billingAddress, since,
// tier, marketingOptIn, notes: 120 bytes} (about 420 bytes).
bson_t* customer_bson(int64_t id) {
  static const std::string kNotes(120, 'n');
  bson_t* doc = bson_new();
  BSON_APPEND_INT64(doc, "_id", id);
  BSON_APPEND_UTF8(doc, "name", customer_name(id).c_str());
  char email[64], phone[32];
  std::snprintf(email, sizeof email, "customer-%lld@example.com", static_cast<long long>(id));
  std::snprintf(phone, sizeof phone, "+1 555 %07lld", static_cast<long long>(id % 10'000'000));
  BSON_APPEND_UTF8(doc, "email", email);
  BSON_APPEND_UTF8(doc, "phone", phone);
  append_address(doc, "shippingAddress", id);
  append_address(doc, "billingAddress", id + 13);
  BSON_APPEND_DATE_TIME(doc, "since", kT0Ms - (id % 2000) * 86'400'000LL);
  BSON_APPEND_UTF8(doc, "tier", kTiers[id % 3]);
  BSON_APPEND_BOOL(doc, "marketingOptIn", id % 2 == 0);
  BSON_APPEND_UTF8(doc, "notes", kNotes.c_str());
  return doc;
}

// The copy the rule makes of a customer: {_id, then name and
// shippingAddress in the customer's own order} (remold's CopyOf).
BsonPtr copy_of(const bson_t* customer) {
  BsonPtr copy(bson_new());
  bson_iter_t it;
  if (bson_iter_init_find(&it, customer, "_id")) bson_append_iter(copy.get(), "_id", -1, &it);
  bson_iter_init(&it, customer);
  while (bson_iter_next(&it)) {
    const std::string key = bson_iter_key(&it);
    if (key == "name" || key == "shippingAddress") bson_append_iter(copy.get(), key.c_str(), -1, &it);
  }
  return copy;
}

// An order's fields after its _id: {customerId, at, status, items: [{sku,
// qty, price}] (1-4), total}, then the copy last when given (where remold
// puts it). `seed` picks the items.
void append_order_fields(bson_t* doc, int64_t customer, int64_t at_ms, uint64_t seed, const bson_t* copy) {
  BSON_APPEND_INT64(doc, kReference, customer);
  BSON_APPEND_DATE_TIME(doc, "at", at_ms);
  BSON_APPEND_UTF8(doc, "status", kStatuses[seed % 4]);
  bson_t items;
  bson_append_array_begin(doc, "items", -1, &items);
  const int n = 1 + static_cast<int>((seed / 4) % 4);
  double total = 0;
  for (int i = 0; i < n; ++i) {
    const std::string key = std::to_string(i);
    bson_t item;
    bson_append_document_begin(&items, key.c_str(), -1, &item);
    char sku[24];
    const uint64_t s = seed / 16 + static_cast<uint64_t>(i) * 7919;
    std::snprintf(sku, sizeof sku, "sku-%05llu", static_cast<unsigned long long>(s % 20000));
    const int qty = 1 + static_cast<int>(s % 3);
    const double price = 4.99 + static_cast<double>(s % 200);
    BSON_APPEND_UTF8(&item, "sku", sku);
    BSON_APPEND_INT32(&item, "qty", qty);
    BSON_APPEND_DOUBLE(&item, "price", price);
    bson_append_document_end(&items, &item);
    total += qty * price;
  }
  bson_append_array_end(doc, &items);
  BSON_APPEND_DOUBLE(doc, "total", total);
  if (copy) BSON_APPEND_DOCUMENT(doc, kInto, copy);
}

// Seeded order j: {_id: j, ...}, with `copy` on the remold side.
bson_t* seeded_order_bson(int64_t j, int64_t customer, const bson_t* copy) {
  bson_t* doc = bson_new();
  BSON_APPEND_INT64(doc, "_id", j);
  append_order_fields(doc, customer, kT0Ms + j * kOrderStepMs, static_cast<uint64_t>(j) * 2654435761u, copy);
  return doc;
}

// The _id of the next order an insert case writes: an ObjectId of the run's
// start time and a counter, so the ids only grow (bson_oid_init's counter
// may wrap) and a case's orders are those between its least and greatest.
bson_oid_t next_order_id() {
  static const uint32_t start = static_cast<uint32_t>(std::time(nullptr));
  static std::atomic<uint64_t> counter{0};
  const uint64_t n = counter.fetch_add(1);
  uint8_t bytes[12];
  for (int i = 0; i < 4; ++i) bytes[i] = static_cast<uint8_t>(start >> (8 * (3 - i)));
  for (int i = 0; i < 8; ++i) bytes[4 + i] = static_cast<uint8_t>(n >> (8 * (7 - i)));
  bson_oid_t id;
  bson_oid_init_from_data(&id, bytes);
  return id;
}

// An order the insert cases write: {_id: ObjectId, ...}, no copy.
bson_t* new_order_bson(const bson_oid_t& id, int64_t customer, uint64_t seed) {
  bson_t* doc = bson_new();
  BSON_APPEND_OID(doc, "_id", &id);
  append_order_fields(doc, customer, kT0Ms + 200LL * 86'400'000, seed, nullptr);
  return doc;
}

// Who owns which seeded order: the fan-out cells' customers (ids 0.. in
// cell order) exactly their cell's count, the other orders round-robin over
// the other customers, shuffled with a fixed seed.
struct Layout {
  std::vector<std::vector<int64_t>> cell_customers;  // by fan-out cell
  int64_t first_regular = 0;                         // regular customers: first_regular..customers-1
  std::vector<int64_t> owner;                        // seeded order j -> customer
  std::vector<int64_t> orders_of;                    // customer -> seeded orders
};

Layout make_layout(const Options& opt) {
  Layout l;
  std::vector<int64_t> owner;
  owner.reserve(static_cast<size_t>(opt.orders));
  int64_t next = 0;
  for (size_t cell = 0; cell < opt.fanout.size(); ++cell) {
    l.cell_customers.emplace_back();
    for (int64_t k = 0; k < opt.customers_for(cell); ++k, ++next) {
      l.cell_customers.back().push_back(next);
      for (int64_t o = 0; o < opt.fanout[cell]; ++o) owner.push_back(next);
    }
  }
  l.first_regular = next;
  const int64_t regulars = opt.customers - next;
  for (int64_t k = 0; static_cast<int64_t>(owner.size()) < opt.orders; ++k) owner.push_back(next + k % regulars);
  std::mt19937_64 rng(42);
  std::shuffle(owner.begin(), owner.end(), rng);
  l.owner = std::move(owner);
  l.orders_of.assign(static_cast<size_t>(opt.customers), 0);
  for (int64_t c : l.owner) ++l.orders_of[static_cast<size_t>(c)];
  return l;
}

// ---- sides and results -----------------------------------------------------------

// Read sides (read_rounds.h): the order with its copy through remold, the
// same directly, and the application's aggregate with $lookup without the
// pattern.
enum ExtrefReadSide { kViewRemold = kReadRemold, kViewDirect = kReadDirect, kViewLookup = kReadApp };
const char* read_side_name(int s) {
  return s == kViewRemold ? "findOne via remold" : s == kViewDirect ? "findOne direct" : "$lookup direct";
}

// The read table (read_rounds.h), one row; `checked`: the sample orders
// whose every side's answer was checked.
ReadTable read_table(int64_t checked) {
  char check[200];
  std::snprintf(check, sizeof check,
                "  check: %lld sample orders read on every side before timing, byte for byte against the\n",
                static_cast<long long>(checked));
  return ReadTable{
      .json_name = "extref_read",
      .title = "(a) the order view: findOne of the order holding its customer's copy (via remold, direct)\n"
               "    vs the application's aggregate $match {_id} + $lookup of the customer (direct)\n",
      .key_columns = {{"orders", 8}, {"customers", 9}},
      .side_headers = {"findOne remold ms", "findOne direct ms", "$lookup ms"},
      .side_keys = {"find_one_remold", "find_one_direct", "app_lookup"},
      .progress_names = {"findOne remold", "direct", "$lookup"},
      .ratio_columns = {{{"lookup/view p50 p99", 19}, ReadRatio::app_over_remold, true},
                        {{"lookup/dir p50", 14}, ReadRatio::app_over_direct, false},
                        {{"view R/D p50", 13}, ReadRatio::remold_over_direct, false}},
      .backend_cpu = {"be cpu us F/L", 15},
      .ratio_fields = {{"lookup_vs_view_remold_p50", ReadRatio::app_over_remold, false},
                       {"lookup_vs_view_remold_p99", ReadRatio::app_over_remold, true},
                       {"lookup_vs_view_direct_p50", ReadRatio::app_over_direct, false},
                       {"view_remold_vs_direct_p50", ReadRatio::remold_over_direct, false}},
      .legend =
          std::string("  p50/p99 ms = latency of one order view (with n <= 100 reads, p99 is the slowest one).\n"
                      "  lookup/view = the $lookup's percentile / the remold findOne's (what the copy saves a reader);\n"
                      "  lookup/dir = the same against the direct findOne; view R/D = findOne through remold /\n"
                      "  findOne direct (the hop: remold forwards reads of the orders unchanged).\n"
                      "  be cpu us F/L = backend CPU microseconds per direct findOne / per $lookup (? = pid not given).\n") +
          check +
          "  generated order (with the copy; $lookup: with [its whole customer]), and every timed read\n"
          "  found its order with its customer.\n",
  };
}

struct OrderRead {
  bool ok = false;
  int64_t found = 0;  // documents returned
  BsonPtr doc;        // the first, when asked for
  bool shaped = false;  // the order with its customer: a copy document, or a $lookup array of one
  double ms = 0;
  std::string error;
};

// Insert sides: through remold; the order alone directly; findOne of the
// customer then the order with its copy, directly.
enum InsertSide { kInsRemold = 0, kInsDirect = 1, kInsCopy = 2 };
constexpr int kInsertSides = 3;
const char* insert_side_name(int s) { return s == kInsRemold ? "remold" : s == kInsDirect ? "direct" : "read+insert"; }
const char* insert_side_db(int s) { return s == kInsRemold ? kRuledDb : kDirectDb; }

struct Inserted {
  bson_oid_t id;
  int64_t customer = 0;
};

enum FanSide { kFanRemold = 0, kFanDirect = 1 };
const char* fan_side_name(int s) { return s == kFanRemold ? "remold" : "direct"; }

struct FanRow {
  int64_t per_customer = 0;
  int64_t customers = 0;
  int64_t updated = 0;  // distinct customers updated (timed and warm-up)
  int64_t synced = 0;   // orders checked afterwards, holding the new copy
  SideSamples timed[2];
  Failures failures;
  std::string verify_message;
  double load1 = 0;
  bool ok() const { return failures.count == 0 && verify_message.empty(); }
};

// The copies of a side's customers as stored now, by customer id, and their names.
struct Customers {
  std::vector<BsonPtr> copies;  // by _id; nullptr: no such customer
  std::vector<std::string> names;
  std::string error;
};

class ExtendedReferenceScenario : public PatternScenario {
 public:
  const char* program() const override { return "extended_reference_bench"; }
  const char* rule() const override { return kRule; }
  const char* options() const override { return kOptions; }
  bool set_option(const std::string& flag, const std::string& value) override;
  void check_options() override;
  void describe() const override;
  bool run(Harness& h) override;
  void clean_up(Harness& h) override;

 private:
  void seed(Harness& h);
  Customers read_customers(Harness& h, const char* db) const;
  std::string check_orders(Harness& h, const char* db, const bson_t* filter, bool with_copy,
                           const std::unordered_map<std::string, int64_t>* expected_ids, int64_t expected,
                           int64_t* seen) const;
  std::string check_count(Harness& h, const char* db) const;
  bool run_reads(Harness& h);
  OrderRead read(int side, int64_t order, bool keep);
  bool run_inserts(Harness& h);
  WriteCase run_insert(Harness& h, int side, int clients, int round, double seconds);
  bool run_fanouts(Harness& h);
  FanRow run_fanout(Harness& h, size_t cell);
  bool final_check(Harness& h);
  void print_insert_table(const std::vector<WriteCase>& cases) const;
  void print_fanout_table(const std::vector<FanRow>& rows) const;

  Options opt_;
  Layout layout_;
  double seed_seconds_[2] = {0, 0};  // remold side, direct side
  int64_t expected_orders_[2] = {0, 0};  // by db: kRuledDb, kDirectDb
  int64_t inserted_via_remold_ = 0;
  std::set<int64_t> updated_via_remold_;  // customers whose name remold updated
  int64_t version_ = 0;                   // names written by the fan-out cells
  std::map<int64_t, std::string> names_;  // customer -> the name last written (both sides)
  std::vector<ClientPtr> read_client_;  // by ReadSide
  ClientPtr fan_client_[2];

  int64_t& expected_orders(const char* db) { return expected_orders_[db == kRuledDb ? 0 : 1]; }
  int64_t expected_orders(const char* db) const { return expected_orders_[db == kRuledDb ? 0 : 1]; }
};

bool ExtendedReferenceScenario::set_option(const std::string& flag, const std::string& value) {
  auto int_arg = [&](int lo, int hi) { return static_cast<int>(parse_int(flag, value, lo, hi)); };
  if (flag == "--only") {
    opt_.run_read = value == "read";
    opt_.run_insert = value == "insert";
    opt_.run_fanout = value == "fanout";
    if (!opt_.run_read && !opt_.run_insert && !opt_.run_fanout)
      usage_error("--only expects read, insert or fanout, got '" + value + "'");
  } else if (flag == "--customers") opt_.customers = parse_int(flag, value, 1, 10'000'000);
  else if (flag == "--orders") opt_.orders = parse_int(flag, value, 1, 100'000'000);
  else if (flag == "--fanout") opt_.fanout = parse_int_list(flag, value, 1, 10'000'000);
  else if (flag == "--fanout-customers") opt_.fanout_customers = parse_int_list(flag, value, 1, 1'000'000);
  else if (flag == "--batch") opt_.batch = int_arg(1, 100000);
  else if (flag == "--read-checks") opt_.read_checks = int_arg(0, 1'000'000);
  else if (flag == "--fanout-seconds") opt_.updates.seconds = parse_number(flag, value, true);
  else if (flag == "--min-updates") opt_.updates.min_rounds = int_arg(1, 10'000'000);
  else if (flag == "--max-updates") opt_.updates.max_rounds = int_arg(1, 10'000'000);
  else if (flag == "--max-fanout-seconds") opt_.updates.max_seconds = parse_number(flag, value);
  else if (flag == "--fanout-warmup") opt_.fanout_warmup = int_arg(0, 100000);
  else if (!set_read_option(opt_.reads, flag, value) && !set_write_option(opt_.inserts, flag, value))
    return false;
  return true;
}

void ExtendedReferenceScenario::check_options() {
  check_read_schedule(opt_.reads);
  if (opt_.updates.max_rounds < opt_.updates.min_rounds) usage_error("--max-updates is below --min-updates");
  if (opt_.fanout_customers.size() != 1 && opt_.fanout_customers.size() != opt_.fanout.size())
    usage_error("--fanout-customers takes one count, or one per --fanout entry (" +
                std::to_string(opt_.fanout.size()) + ")");
  int64_t cell_customers = 0, cell_orders = 0;
  for (size_t cell = 0; cell < opt_.fanout.size(); ++cell) {
    cell_customers += opt_.customers_for(cell);
    cell_orders += opt_.customers_for(cell) * opt_.fanout[cell];
  }
  if (cell_customers >= opt_.customers)
    usage_error("the fan-out cells take " + std::to_string(cell_customers) + " customers; --customers must be more (" +
                std::to_string(opt_.customers) + ")");
  if (cell_orders > opt_.orders)
    usage_error("the fan-out cells take " + std::to_string(cell_orders) + " orders; --orders is " +
                std::to_string(opt_.orders));
}

void ExtendedReferenceScenario::describe() const {
  std::string cells;
  for (size_t i = 0; i < opt_.fanout.size(); ++i)
    cells += (cells.empty() ? "" : ", ") + std::to_string(opt_.customers_for(i)) + " x " +
             std::to_string(opt_.fanout[i]) + " orders";
  std::printf(
      "  remold: bench_extref.orders written through remold, which copies {_id, name, shippingAddress}\n"
      "    of bench_extref.customers into each order's `customer` and keeps the copies synced;\n"
      "    direct: bench_extref_direct, the application without the pattern (orders without copies)\n"
      "  data seeded directly on the backend, the same on both sides: %lld customers {_id, name, email,\n"
      "    phone, shippingAddress, billingAddress, since, tier, marketingOptIn, notes} (~420 bytes)\n"
      "    and %lld orders {_id, customerId, at, status, items: 1-4, total} (~250 bytes; remold\n"
      "    side: + the customer's copy, computed by the bench), a {customerId: 1} index on the\n"
      "    orders; the customers of the fan-out cells own exactly their cell's orders (%s),\n"
      "    the other orders go round-robin to the other customers\n",
      static_cast<long long>(opt_.customers), static_cast<long long>(opt_.orders), cells.c_str());
  if (opt_.run_read)
    std::printf(
        "  (a) read \"the order view\" of a random seeded order: findOne({_id}) of the order holding\n"
        "      its customer's copy, through remold and directly, against the application without the\n"
        "      pattern, directly on bench_extref_direct: aggregate [{$match: {_id}}, {$lookup: {from:\n"
        "      customers, localField: customerId, foreignField: _id, as: customer}}]; %d untimed reads\n"
        "      per side, then rounds of one read per side (the order rotating) for at least %.3g s and\n"
        "      %d rounds\n",
        opt_.reads.warmup, opt_.reads.limits.seconds, opt_.reads.limits.min_rounds);
  if (opt_.run_insert) {
    const std::string clients = clients_text(opt_.inserts.clients);
    std::printf(
        "  (b) insert: an order of a random customer outside the fan-out cells: remold = insert_one\n"
        "      into bench_extref.orders through remold (remold reads the customer, inserts the order\n"
        "      with the copy, reads the customer again); direct = insert_one of the order alone\n"
        "      (no copy) into bench_extref_direct.orders; read+insert = the application keeping the\n"
        "      copy itself: findOne of the customer ({name, shippingAddress}), then insert_one of the\n"
        "      order with the copy, directly; latency per order (both calls for read+insert);\n"
        "      %.3g s untimed per side, then %d rounds x clients %s x (remold, direct, read+insert) of\n"
        "      %.3g s, back to back with the order swapping; every case verified afterwards\n",
        opt_.inserts.warmup, opt_.inserts.rounds, clients.c_str(), opt_.inserts.seconds);
  }
  if (opt_.run_fanout)
    std::printf(
        "  (c) fan-out: update_one({_id}, {$set: {name}}) of a random customer of the cell, a new name\n"
        "      every round: remold = through remold on bench_extref (remold syncs the copy on every\n"
        "      order of the customer); direct = the same update of the customer alone on\n"
        "      bench_extref_direct; latency of the client's update call; %d untimed update(s) per side,\n"
        "      then rounds of one update per side for at least %.3g s and %d rounds (stopped after\n"
        "      %.3g s once there are %d); the cell's customers and orders verified afterwards\n",
        opt_.fanout_warmup, opt_.updates.seconds, opt_.updates.min_rounds, opt_.updates.max_seconds,
        opt_.updates.rounds_before_cutoff);
  std::printf("  check at the end: every order of bench_extref holds the copy of its customer as stored\n"
              "    now, read directly\n");
}

// ---- data and checks -------------------------------------------------------------

// Drops both databases, then seeds customers and orders directly on each
// side (the remold side's orders with their copies) and indexes customerId.
void ExtendedReferenceScenario::seed(Harness& h) {
  layout_ = make_layout(opt_);
  mongoc_client_t* direct = h.admin(Via::direct);
  Documents customers;
  customers.reserve(static_cast<size_t>(opt_.customers));
  std::vector<BsonPtr> copies;
  copies.reserve(static_cast<size_t>(opt_.customers));
  for (int64_t c = 0; c < opt_.customers; ++c) {
    bson_t* doc = customer_bson(c);
    copies.push_back(copy_of(doc));
    customers.add(doc);
  }
  for (const char* db : {kRuledDb, kDirectDb}) {
    const bool ruled = db == kRuledDb;
    const auto start = Clock::now();
    command(direct, db, json(R"({"dropDatabase": 1})").get(), true);
    CollectionPtr coll = collection(direct, db, "customers");
    load_in_batches(coll.get(), customers, opt_.batch, h.cpu(), std::string("customers on ") + db);
    coll = collection(direct, db, "orders");
    constexpr int64_t kChunk = 20'000;  // orders built at a time
    for (int64_t begin = 0; begin < opt_.orders; begin += kChunk) {
      Documents orders;
      const int64_t end = std::min(opt_.orders, begin + kChunk);
      orders.reserve(static_cast<size_t>(end - begin));
      for (int64_t j = begin; j < end; ++j) {
        const int64_t owner = layout_.owner[static_cast<size_t>(j)];
        orders.add(seeded_order_bson(j, owner, ruled ? copies[static_cast<size_t>(owner)].get() : nullptr));
      }
      load_in_batches(coll.get(), orders, opt_.batch, h.cpu(), std::string("orders on ") + db);
    }
    command(direct, db,
            json(R"({"createIndexes": "orders", "indexes": [{"key": {"customerId": 1}, "name": "customerId_1"}]})")
                .get());
    seed_seconds_[ruled ? 0 : 1] = seconds_since(start);
    expected_orders(db) = opt_.orders;
  }
  std::printf("seeded %lld customers and %lld orders directly on each side in %.2f s (remold side, with the\n"
              "copies) + %.2f s (direct side)\n",
              static_cast<long long>(opt_.customers), static_cast<long long>(opt_.orders), seed_seconds_[0],
              seed_seconds_[1]);
  std::fflush(stdout);
}

Customers ExtendedReferenceScenario::read_customers(Harness& h, const char* db) const {
  Customers out;
  out.copies.resize(static_cast<size_t>(opt_.customers));
  out.names.resize(static_cast<size_t>(opt_.customers));
  CollectionPtr coll = collection(h.admin(Via::direct), db, "customers");
  // Sorted on the server (docs/backends.md, 8: an unsorted cursor may repeat updated documents).
  mongoc_cursor_t* cursor =
      mongoc_collection_find_with_opts(coll.get(), json("{}").get(), json(R"({"sort": {"_id": 1}})").get(), nullptr);
  const bson_t* doc;
  while (mongoc_cursor_next(cursor, &doc)) {
    const std::optional<int64_t> id = int_at(doc, "_id");
    if (!id || *id < 0 || *id >= opt_.customers) {
      out.error += "unexpected customer " + to_json(doc) + "; ";
      continue;
    }
    out.copies[static_cast<size_t>(*id)] = copy_of(doc);
    out.names[static_cast<size_t>(*id)] = utf8_at(doc, "name").value_or("");
  }
  bson_error_t error;
  if (mongoc_cursor_error(cursor, &error)) out.error += std::string("reading customers failed: ") + error.message;
  mongoc_cursor_destroy(cursor);
  return out;
}

// Reads the orders of `db` matching `filter` directly, projected to
// {customerId, customer}: each must hold the copy of its customer as stored
// now (`with_copy`) or no copy at all; with `expected_ids`, the orders found
// must be exactly those (ObjectId -> customerId). `expected` >= 0: how many
// orders must match. Returns "" when all agree, else what differs (first few).
std::string ExtendedReferenceScenario::check_orders(Harness& h, const char* db, const bson_t* filter, bool with_copy,
                                                    const std::unordered_map<std::string, int64_t>* expected_ids,
                                                    int64_t expected, int64_t* seen_out) const {
  std::ostringstream msg;
  Customers customers;
  if (with_copy) {
    customers = read_customers(h, db);
    if (!customers.error.empty()) msg << customers.error << "; ";
  }
  CollectionPtr orders = collection(h.admin(Via::direct), db, "orders");
  BsonPtr opts(BCON_NEW("projection", "{", kReference, BCON_INT32(1), kInto, BCON_INT32(1), "}"));
  mongoc_cursor_t* cursor = mongoc_collection_find_with_opts(orders.get(), filter, opts.get(), nullptr);
  const bson_t* doc;
  int64_t seen = 0, bad = 0;
  std::set<std::string> found_ids;
  while (mongoc_cursor_next(cursor, &doc)) {
    ++seen;
    std::ostringstream why;
    const std::optional<int64_t> customer = int_at(doc, kReference);
    if (expected_ids) {
      bson_iter_t it;
      if (!bson_iter_init_find(&it, doc, "_id") || !BSON_ITER_HOLDS_OID(&it)) {
        why << "not an order this case inserted";
      } else {
        const std::string key = oid_key(*bson_iter_oid(&it));
        const auto e = expected_ids->find(key);
        if (e == expected_ids->end()) why << "not acknowledged to the client";
        else if (customer != e->second) why << "customerId is not " << e->second;
        found_ids.insert(key);
      }
    }
    if (why.str().empty()) {
      if (!customer || *customer < 0 || *customer >= opt_.customers) {
        why << "customerId is not a customer";
      } else if (with_copy) {
        BsonPtr held = document_at(doc, kInto);
        const bson_t* want = customers.copies[static_cast<size_t>(*customer)].get();
        if (!same(held.get(), want))
          why << kInto << " is " << (has_field(doc, kInto) && !held ? "not a document" : json_or_none(held.get()))
              << ", expected " << json_or_none(want);
      } else if (has_field(doc, kInto)) {
        why << "holds a copy, the application wrote none";
      }
    }
    if (!why.str().empty() && bad++ < 3) msg << "order " << to_json(doc) << ": " << why.str() << "; ";
  }
  bson_error_t error;
  if (mongoc_cursor_error(cursor, &error)) msg << "reading orders failed: " << error.message << "; ";
  mongoc_cursor_destroy(cursor);
  if (bad) msg << bad << " of " << seen << " orders wrong; ";
  if (expected_ids && static_cast<int64_t>(found_ids.size()) != static_cast<int64_t>(expected_ids->size()))
    msg << expected_ids->size() - std::min(expected_ids->size(), found_ids.size()) << " of "
        << expected_ids->size() << " acknowledged orders not found; ";
  if (expected >= 0 && seen != expected) msg << seen << " orders found, expected " << expected << "; ";
  if (seen_out) *seen_out = seen;
  return msg.str();
}

// The orders stored on `db` against those seeded and acknowledged.
std::string ExtendedReferenceScenario::check_count(Harness& h, const char* db) const {
  CollectionPtr orders = collection(h.admin(Via::direct), db, "orders");
  bson_error_t error;
  const int64_t n =
      mongoc_collection_count_documents(orders.get(), json("{}").get(), nullptr, nullptr, nullptr, &error);
  if (n < 0) return std::string("counting orders failed: ") + error.message + "; ";
  if (n != expected_orders(db))
    return std::to_string(n) + " orders on " + db + ", " + std::to_string(expected_orders(db)) +
           " seeded and acknowledged; ";
  return "";
}

// ---- (a) the order view --------------------------------------------------------------

OrderRead ExtendedReferenceScenario::read(int side, int64_t order, bool keep) {
  static const BsonPtr find_one_opts = json(R"({"limit": 1, "singleBatch": true})");
  OrderRead out;
  bson_error_t error;
  mongoc_client_t* client = read_client_[side].get();
  mongoc_cursor_t* cursor;
  BsonPtr query;
  const auto start = Clock::now();
  // Alive until the cursor is destroyed.
  CollectionPtr orders = collection(client, side == kViewLookup ? kDirectDb : kRuledDb, "orders");
  if (side == kViewLookup) {
    query.reset(BCON_NEW("pipeline", "[", "{", "$match", "{", "_id", BCON_INT64(order), "}", "}", "{", "$lookup", "{",
                         "from", BCON_UTF8("customers"), "localField", BCON_UTF8(kReference), "foreignField",
                         BCON_UTF8("_id"), "as", BCON_UTF8(kInto), "}", "}", "]"));
    cursor = mongoc_collection_aggregate(orders.get(), MONGOC_QUERY_NONE, query.get(), nullptr, nullptr);
  } else {
    query.reset(BCON_NEW("_id", BCON_INT64(order)));
    cursor = mongoc_collection_find_with_opts(orders.get(), query.get(), find_one_opts.get(), nullptr);
  }
  const bson_t* doc;
  while (mongoc_cursor_next(cursor, &doc)) {
    if (out.found++ > 0) continue;
    if (side == kViewLookup) {
      bson_iter_t it, child;
      out.shaped = bson_iter_init_find(&it, doc, kInto) && BSON_ITER_HOLDS_ARRAY(&it) &&
                   bson_iter_recurse(&it, &child) && bson_iter_next(&child) && BSON_ITER_HOLDS_DOCUMENT(&child) &&
                   !bson_iter_next(&child);
    } else {
      bson_iter_t it;
      out.shaped = bson_iter_init_find(&it, doc, kInto) && BSON_ITER_HOLDS_DOCUMENT(&it);
    }
    if (keep) out.doc.reset(bson_copy(doc));
  }
  out.ok = !mongoc_cursor_error(cursor, &error);
  mongoc_cursor_destroy(cursor);
  out.ms = ms_since(start);
  if (!out.ok) out.error = error.message;
  return out;
}

bool ExtendedReferenceScenario::run_reads(Harness& h) {
  read_client_ = connect_read_sides(h);
  ReadCell row;
  row.label = "  read";
  row.key_text = {std::to_string(opt_.orders), std::to_string(opt_.customers)};
  row.key_json = {{"orders", std::to_string(opt_.orders)},
                  {"customers", std::to_string(opt_.customers)},
                  {"seed_seconds", number_or_null(seed_seconds_[0] + seed_seconds_[1])}};
  int64_t checked = 0;  // sample orders whose every side's answer was checked
  auto note = [&](int side, const OrderRead& r) {
    if (!r.ok) row.failures.add(std::string(read_side_name(side)) + ": " + r.error);
  };

  // Every side's answer for sample orders against the generated documents,
  // byte for byte: the order with the copy (findOne), the order with
  // [the whole customer] ($lookup).
  std::mt19937_64 rng(7);
  std::ostringstream msg;
  std::vector<int64_t> sample;
  for (int i = 0; i < opt_.read_checks; ++i)
    sample.push_back(static_cast<int64_t>(rng() % static_cast<uint64_t>(opt_.orders)));
  for (const int64_t j : sample) {
    const int64_t owner = layout_.owner[static_cast<size_t>(j)];
    BsonPtr customer(customer_bson(owner));
    BsonPtr copy = copy_of(customer.get());
    BsonPtr with_copy(seeded_order_bson(j, owner, copy.get()));
    BsonPtr joined(seeded_order_bson(j, owner, nullptr));
    {
      bson_t array;
      bson_append_array_begin(joined.get(), kInto, -1, &array);
      BSON_APPEND_DOCUMENT(&array, "0", customer.get());
      bson_append_array_end(joined.get(), &array);
    }
    for (int side = 0; side < kReadSides; ++side) {
      OrderRead r = read(side, j, true);
      note(side, r);
      if (!r.ok) continue;
      const bson_t* want = side == kViewLookup ? joined.get() : with_copy.get();
      if (r.found != 1 || !same(r.doc.get(), want))
        msg << read_side_name(side) << " of order " << j << ": " << r.found << " documents, the first "
            << json_or_none(r.doc.get()) << ", expected " << to_json(want) << "; ";
    }
    ++checked;
  }
  row.verify_message = msg.str();

  int64_t order = 0;
  auto pick_order = [&] { order = static_cast<int64_t>(rng() % static_cast<uint64_t>(opt_.orders)); };
  auto timed_read = [&](int side) -> std::optional<double> {
    OrderRead r = read(side, order, false);
    note(side, r);
    if (!r.ok) return std::nullopt;
    if (r.found != 1 || !r.shaped)
      row.failures.add(std::string(read_side_name(side)) + ": a timed read of order " + std::to_string(order) +
                       " returned " + std::to_string(r.found) + " documents" +
                       (r.found ? std::string(" without its customer") : ""));
    return r.ms;
  };
  auto warm = [&](int side, int w) { note(side, read(side, w % opt_.orders, false)); };
  time_read_cell(row, opt_.reads, h.cpu(), warm, pick_order, timed_read);
  const ReadTable table = read_table(checked);
  print_read_progress(row, table);
  print_read_table({row}, table);
  return row.ok();
}

// ---- (b) order inserts -----------------------------------------------------------

// One closed-loop insert case of `seconds` (round -1: warm-up), verified:
// the orders it inserted, and the count of the side's orders.
WriteCase ExtendedReferenceScenario::run_insert(Harness& h, int side, int clients, int round, double seconds) {
  const char* db = insert_side_db(side);
  WriteCase result(side, clients, round);
  std::vector<std::vector<Inserted>> inserted(static_cast<size_t>(clients));  // by thread
  auto prepare = [&](mongoc_client_t* client, int thread) -> Operation {
    SharedCollection orders = shared_collection(client, db, "orders");
    SharedCollection customers = shared_collection(client, db, "customers");
    std::vector<Inserted>* mine = &inserted[static_cast<size_t>(thread)];
    std::mt19937_64 rng(thread_seed(round + 2, side, clients, thread));
    const int64_t first = layout_.first_regular, regulars = opt_.customers - layout_.first_regular;
    return [side, orders, customers, mine, rng, first, regulars](Tally& tally) mutable {
      static const BsonPtr copy_opts = json(R"({"projection": {"name": 1, "shippingAddress": 1}, "limit": 1,
                                               "singleBatch": true})");
      Inserted ins;
      ins.id = next_order_id();
      ins.customer = first + static_cast<int64_t>(rng() % static_cast<uint64_t>(regulars));
      BsonPtr order(new_order_bson(ins.id, ins.customer, rng()));
      BsonPtr by_id(BCON_NEW("_id", BCON_INT64(ins.customer)));
      bson_error_t error;
      const auto start = Clock::now();
      bool ok = true;
      BsonPtr with_copy;
      if (side == kInsCopy) {
        // The application's own read of the customer, and its copy.
        mongoc_cursor_t* cursor =
            mongoc_collection_find_with_opts(customers.get(), by_id.get(), copy_opts.get(), nullptr);
        const bson_t* doc;
        if (mongoc_cursor_next(cursor, &doc)) {
          BsonPtr copy = copy_of(doc);
          with_copy.reset(bson_copy(order.get()));
          BSON_APPEND_DOCUMENT(with_copy.get(), kInto, copy.get());
        }
        ok = !mongoc_cursor_error(cursor, &error);
        mongoc_cursor_destroy(cursor);
        if (ok && !with_copy) {
          ok = false;
          std::snprintf(error.message, sizeof error.message, "customer %lld not found",
                        static_cast<long long>(ins.customer));
        }
      }
      if (ok)
        ok = mongoc_collection_insert_one(orders.get(), with_copy ? with_copy.get() : order.get(), nullptr, nullptr,
                                          &error);
      tally.record(ok, ms_since(start), error.message);
      if (ok) mine->push_back(ins);
      return true;
    };
  };
  const Via via = side == kInsRemold ? Via::remold : Via::direct;
  result.run = run_client_threads(h.connect(via, clients), h.cpu(), seconds, prepare);

  // The orders of this case: the order ids only grow (next_order_id), so
  // the case's orders are the range between its least and greatest _id.
  std::unordered_map<std::string, int64_t> expected;
  std::optional<bson_oid_t> least, greatest;
  for (const auto& thread : inserted)
    for (const Inserted& ins : thread) {
      expected.emplace(oid_key(ins.id), ins.customer);
      if (!least || bson_oid_compare(&ins.id, &*least) < 0) least = ins.id;
      if (!greatest || bson_oid_compare(&ins.id, &*greatest) > 0) greatest = ins.id;
    }
  expected_orders(db) += result.ops();
  if (side == kInsRemold) inserted_via_remold_ += result.ops();
  std::string message;
  if (least) {
    BsonPtr range(BCON_NEW("_id", "{", "$gte", BCON_OID(&*least), "$lte", BCON_OID(&*greatest), "}"));
    message = check_orders(h, db, range.get(), side != kInsDirect, &expected, -1, nullptr);
  }
  result.verify_message = message + check_count(h, db);
  return result;
}

// An insert case's tally (write_rounds.h): orders acknowledged, latency per
// order (read+insert: both calls).
bool ExtendedReferenceScenario::run_inserts(Harness& h) {
  std::printf("\n");
  std::vector<const char*> sides;
  for (int side = 0; side < kInsertSides; ++side) sides.push_back(insert_side_name(side));
  const WriteRounds rounds =
      run_write_cases(opt_.inserts, sides, "orders", [&](int side, int clients, int round, double seconds) {
        return run_insert(h, side, clients, round, seconds);
      });
  print_insert_table(rounds.cases);
  return rounds.ok;
}

// ---- (c) fan-out -------------------------------------------------------------------

FanRow ExtendedReferenceScenario::run_fanout(Harness& h, size_t cell) {
  FanRow row;
  row.per_customer = opt_.fanout[cell];
  const std::vector<int64_t>& group = layout_.cell_customers[cell];
  row.customers = static_cast<int64_t>(group.size());
  std::mt19937_64 rng(1000 + cell);
  std::set<int64_t> updated;
  int64_t customer = group.front();
  std::string name;
  // One round's customer and its new name, the same on both sides.
  auto pick = [&] {
    customer = group[static_cast<size_t>(rng() % group.size())];
    name = customer_name(customer) + " v" + std::to_string(++version_);
    names_[customer] = name;
    updated.insert(customer);
  };
  auto update = [&](int side) -> std::optional<double> {
    CollectionPtr customers =
        collection(fan_client_[side].get(), side == kFanRemold ? kRuledDb : kDirectDb, "customers");
    BsonPtr selector(BCON_NEW("_id", BCON_INT64(customer)));
    BsonPtr change(BCON_NEW("$set", "{", "name", BCON_UTF8(name.c_str()), "}"));
    bson_t reply;
    bson_error_t error;
    const auto start = Clock::now();
    bool ok = mongoc_collection_update_one(customers.get(), selector.get(), change.get(), nullptr, &reply, &error);
    const double ms = ms_since(start);
    std::string why = ok ? "" : error.message;
    if (ok && (number_at(&reply, "matchedCount").value_or(0) != 1 ||
               number_at(&reply, "modifiedCount").value_or(0) != 1))
      why = "customer " + std::to_string(customer) + ": " + to_json(&reply);
    bson_destroy(&reply);
    if (!why.empty()) {
      row.failures.add(std::string(fan_side_name(side)) + ": " + why);
      return std::nullopt;
    }
    if (side == kFanRemold) updated_via_remold_.insert(customer);
    return ms;
  };
  for (int w = 0; w < opt_.fanout_warmup; ++w) {
    pick();
    for (int side : {kFanRemold, kFanDirect}) update(side);
  }
  std::vector<SideSamples> samples = run_rounds(opt_.updates, {kFanRemold, kFanDirect}, h.cpu(), pick, update);
  for (int side : {kFanRemold, kFanDirect}) row.timed[side] = std::move(samples[side]);
  row.load1 = load_average();
  row.updated = static_cast<int64_t>(updated.size());

  // The updated customers' names on both sides, and every one of their
  // orders on the remold side holding the copy of the customer as it is now.
  std::ostringstream msg;
  for (const char* db : {kRuledDb, kDirectDb}) {
    Customers now = read_customers(h, db);
    msg << now.error;
    for (int64_t c : updated)
      if (now.names[static_cast<size_t>(c)] != names_[c])
        msg << "customer " << c << " on " << db << " is named '" << now.names[static_cast<size_t>(c)] << "', "
            << "expected '" << names_[c] << "'; ";
  }
  bson_t filter, ref, in;
  bson_init(&filter);
  bson_append_document_begin(&filter, kReference, -1, &ref);
  bson_append_array_begin(&ref, "$in", -1, &in);
  int i = 0;
  for (int64_t c : updated) {
    const std::string key = std::to_string(i++);
    BSON_APPEND_INT64(&in, key.c_str(), c);
  }
  bson_append_array_end(&ref, &in);
  bson_append_document_end(&filter, &ref);
  int64_t expected = 0;
  for (int64_t c : updated) expected += layout_.orders_of[static_cast<size_t>(c)];
  msg << check_orders(h, kRuledDb, &filter, true, nullptr, expected, &row.synced);
  bson_destroy(&filter);
  row.verify_message = msg.str();
  return row;
}

bool ExtendedReferenceScenario::run_fanouts(Harness& h) {
  fan_client_[kFanRemold] = h.connect(Via::remold);
  fan_client_[kFanDirect] = h.connect(Via::direct);
  std::printf("\n");
  bool all_ok = true;
  std::vector<FanRow> rows;
  for (size_t cell = 0; cell < opt_.fanout.size(); ++cell) {
    rows.push_back(run_fanout(h, cell));
    const FanRow& r = rows.back();
    std::printf("  fan-out %lld orders/customer: %zu rounds, p50 update remold %.3f ms, direct %.3f ms; "
                "%lld orders of %lld customers checked%s%s\n",
                static_cast<long long>(r.per_customer), r.timed[kFanRemold].ms.size(), r.timed[kFanRemold].p50(),
                r.timed[kFanDirect].p50(), static_cast<long long>(r.synced), static_cast<long long>(r.updated),
                r.ok() ? "" : "; FAILED: ", r.ok() ? "" : (r.verify_message + r.failures.first).c_str());
    std::fflush(stdout);
    all_ok = all_ok && r.ok();
  }
  print_fanout_table(rows);
  return all_ok;
}

// ---- the final check -----------------------------------------------------------------

bool ExtendedReferenceScenario::final_check(Harness& h) {
  int64_t seen = 0;
  const auto start = Clock::now();
  const std::string message = check_orders(h, kRuledDb, json("{}").get(), true, nullptr, -1, &seen) +
                              check_count(h, kRuledDb) + check_count(h, kDirectDb);
  int64_t synced = 0;
  for (int64_t c : updated_via_remold_) synced += layout_.orders_of[static_cast<size_t>(c)];
  const bool ok = message.empty();
  std::printf("\ncheck: %lld orders of %s read directly in %.2f s, of them %lld inserted through remold and\n"
              "  %lld of the %lld customers renamed through remold: %s%s\n",
              static_cast<long long>(seen), kRuledDb, seconds_since(start),
              static_cast<long long>(inserted_via_remold_), static_cast<long long>(synced),
              static_cast<long long>(updated_via_remold_.size()),
              ok ? "every one holds the copy of its customer as stored now" : "FAILED: ", message.c_str());
  print_bench_json(JsonObject()
                       .add("bench", "extref_check")
                       .add("orders", seen)
                       .add("inserted_via_remold", inserted_via_remold_)
                       .add("orders_of_renamed_customers", synced)
                       .add("renamed_customers", updated_via_remold_.size())
                       .add("ok", ok)
                       .add("check", ok ? std::string("verified") : message));
  std::fflush(stdout);
  return ok;
}

// ---- tables ----------------------------------------------------------------------

// A difference, negative by noise: null only when not finite.
std::string signed_json(double value) {
  if (!std::isfinite(value)) return "null";
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", value);
  return text;
}

void ExtendedReferenceScenario::print_insert_table(const std::vector<WriteCase>& cases) const {
  std::printf("\n(b) order insert: remold (one insert; remold reads the customer, inserts the order with the\n"
              "    copy, reads the customer again) vs direct (the order alone) and read+insert (the\n"
              "    application's findOne of the customer, then the order with the copy)\n");
  std::printf("%7s %11s %11s %11s %5s %5s %11s %17s %17s %17s %11s %11s %7s %18s %17s %s\n", "clients", "remold op/s",
              "direct op/s", "r+i op/s", "R/D", "R/RI", "range R/D", "remold p50/p99 ms", "direct p50/p99 ms",
              "r+i p50/p99 ms", "p50 p99 R/D", "p50 p99 R/RI", "rm cpu", "be cpu us R/D/RI", "ops R/D/RI", "check");
  std::vector<JsonObject> json_rows;
  for (int clients : opt_.inserts.clients) {
    std::vector<const WriteCase*> side_cases[kInsertSides];
    for (const auto& c : cases)
      if (c.clients == clients) side_cases[c.side].push_back(&c);
    if (side_cases[kInsRemold].empty() || side_cases[kInsDirect].empty() || side_cases[kInsCopy].empty()) continue;
    std::vector<double> ms[kInsertSides], rates[kInsertSides];
    int64_t ops[kInsertSides] = {0, 0, 0};
    double cpu_r[kInsertSides] = {0, 0, 0}, cpu_b[kInsertSides] = {0, 0, 0};
    uint64_t errors = 0;
    bool known_r = true, known_b = true;
    std::string check;
    for (int side = 0; side < kInsertSides; ++side) {
      for (const auto* c : side_cases[side]) {
        ms[side].insert(ms[side].end(), c->run.tally.ms.begin(), c->run.tally.ms.end());
        rates[side].push_back(c->rate());
        ops[side] += c->ops();
        errors += c->run.tally.failures.count;
        known_r = known_r && c->run.cpu.remold >= 0;
        known_b = known_b && c->run.cpu.backend >= 0;
        cpu_r[side] += c->run.cpu.remold;
        cpu_b[side] += c->run.cpu.backend;
        if (!c->ok() && check.empty())
          check = std::string("FAILED ") + insert_side_name(side) + " round " + std::to_string(c->round) + ": " +
                  c->failure();
      }
    }
    if (check.empty()) check = "verified";
    double rate[kInsertSides], p50[kInsertSides], p99[kInsertSides], be[kInsertSides];
    for (int side = 0; side < kInsertSides; ++side) {
      rate[side] = median(rates[side]);
      p50[side] = percentile(ms[side], 0.5);
      p99[side] = percentile(ms[side], 0.99);
      be[side] = known_b && ops[side] > 0 ? cpu_b[side] / static_cast<double>(ops[side]) : -1;
    }
    const double rm = known_r && ops[kInsRemold] > 0 ? cpu_r[kInsRemold] / static_cast<double>(ops[kInsRemold]) : -1;
    const auto range = ratio_range(rates[kInsRemold], rates[kInsDirect]);
    char range_text[32] = "-";
    if (range) std::snprintf(range_text, sizeof range_text, "%.2f-%.2f", range->first, range->second);
    auto rate_ratio = [&](int a, int b) { return rate[b] > 0 ? rate[a] / rate[b] : 0; };
    auto lat_ratio = [&](int a, int b) {
      return ratio_text(p50[a], p50[b]) + " " + ratio_text(p99[a], p99[b]);
    };
    const std::string lat_d = lat_ratio(kInsRemold, kInsDirect), lat_c = lat_ratio(kInsRemold, kInsCopy);
    const std::string be_text = cpu_us(be[kInsRemold]) + "/" + cpu_us(be[kInsDirect]) + "/" + cpu_us(be[kInsCopy]);
    const std::string nops = std::to_string(ops[kInsRemold]) + "/" + std::to_string(ops[kInsDirect]) + "/" +
                             std::to_string(ops[kInsCopy]);
    std::printf("%7d %11.0f %11.0f %11.0f %5.2f %5.2f %11s %17s %17s %17s %11s %11s %7s %18s %17s %s\n", clients,
                rate[kInsRemold], rate[kInsDirect], rate[kInsCopy], rate_ratio(kInsRemold, kInsDirect),
                rate_ratio(kInsRemold, kInsCopy), range_text, ms_pair(ms[kInsRemold]).c_str(),
                ms_pair(ms[kInsDirect]).c_str(), ms_pair(ms[kInsCopy]).c_str(), lat_d.c_str(), lat_c.c_str(),
                cpu_us(rm).c_str(), be_text.c_str(), nops.c_str(), check.c_str());
    std::string rounds = "[";
    for (size_t i = 0; i < rates[kInsRemold].size() && i < rates[kInsDirect].size() && i < rates[kInsCopy].size(); ++i)
      rounds += (i ? "," : "") + JsonObject()
                                     .raw("remold", number_or_null(rates[kInsRemold][i], "%.1f"))
                                     .raw("direct", number_or_null(rates[kInsDirect][i], "%.1f"))
                                     .raw("read_insert", number_or_null(rates[kInsCopy][i], "%.1f"))
                                     .str();
    rounds += "]";
    json_rows.push_back(
        JsonObject()
            .add("bench", "extref_insert").add("clients", clients)
            .raw("remold_ops_per_s", number_or_null(rate[kInsRemold], "%.1f"))
            .raw("direct_ops_per_s", number_or_null(rate[kInsDirect], "%.1f"))
            .raw("read_insert_ops_per_s", number_or_null(rate[kInsCopy], "%.1f"))
            .raw("ratio_vs_direct", number_or_null(rate[kInsDirect] > 0 ? rate_ratio(kInsRemold, kInsDirect) : -1))
            .raw("ratio_vs_read_insert", number_or_null(rate[kInsCopy] > 0 ? rate_ratio(kInsRemold, kInsCopy) : -1))
            .raw("round_ratio_vs_direct_min", number_or_null(range ? range->first : -1))
            .raw("round_ratio_vs_direct_max", number_or_null(range ? range->second : -1))
            .raw("remold_p50_ms", number_or_null(p50[kInsRemold])).raw("remold_p99_ms", number_or_null(p99[kInsRemold]))
            .raw("direct_p50_ms", number_or_null(p50[kInsDirect])).raw("direct_p99_ms", number_or_null(p99[kInsDirect]))
            .raw("read_insert_p50_ms", number_or_null(p50[kInsCopy]))
            .raw("read_insert_p99_ms", number_or_null(p99[kInsCopy]))
            .raw("rounds", rounds)
            .raw("cpu_us_per_op",
                 JsonObject()
                     .raw("remold_side", JsonObject()
                                             .raw("remold", number_or_null(us_of(rm)))
                                             .raw("backend", number_or_null(us_of(be[kInsRemold])))
                                             .str())
                     .raw("direct_side", JsonObject().raw("backend", number_or_null(us_of(be[kInsDirect]))).str())
                     .raw("read_insert_side", JsonObject().raw("backend", number_or_null(us_of(be[kInsCopy]))).str())
                     .str())
            .raw("ops", JsonObject()
                            .add("remold", ops[kInsRemold])
                            .add("direct", ops[kInsDirect])
                            .add("read_insert", ops[kInsCopy])
                            .str())
            .add("errors", errors).add("ok", check == "verified").add("check", check)
            .add("cores", usable_cores()));
  }
  std::printf(
      "\n  op/s = orders per second (median of the rounds); r+i = read+insert (both calls).\n"
      "  R/D, R/RI = remold / direct, remold / read+insert (above 1: remold is faster); range R/D =\n"
      "  remold / direct in single rounds (wide: noisy machine). p50/p99 ms = latency of one order,\n"
      "  every round's samples together; p50 p99 R/D, R/RI = remold's percentile / the other's.\n"
      "  rm cpu = remold CPU microseconds per order; be cpu = backend CPU microseconds per order of\n"
      "  each side (? = pid not given). check: the orders each case inserted are exactly those\n"
      "  acknowledged, with their customerId, holding the copy of their customer as stored now\n"
      "  (remold, read+insert) or none (direct), and the side's order count, on the backend directly.\n");
  for (const auto& row : json_rows) print_bench_json(row);
  std::fflush(stdout);
}

void ExtendedReferenceScenario::print_fanout_table(const std::vector<FanRow>& rows) const {
  std::printf("\n(c) fan-out: a customer's name updated through remold (which syncs the copy on every order of\n"
              "    the customer) vs the same update of the customer alone, directly\n");
  std::printf("%15s %9s %7s %18s %18s %15s %13s %14s %14s %15s %5s %s\n", "orders/customer", "customers", "updated",
              "remold p50/p99 ms", "direct p50/p99 ms", "p50 p99 R/D", "added p50 ms", "added us/order",
              "rm cpu us/upd", "be cpu us R/D", "n", "check");
  for (const FanRow& r : rows) {
    const SideSamples& rm = r.timed[kFanRemold];
    const SideSamples& d = r.timed[kFanDirect];
    std::string check = "verified";
    if (!r.ok()) check = "FAILED: " + r.verify_message + r.failures.text("updates");
    const bool known = rm.p50() >= 0 && d.p50() >= 0;
    const double added = rm.p50() - d.p50();
    char added_ms[32] = "-", added_us[32] = "-";
    if (known) {
      std::snprintf(added_ms, sizeof added_ms, "%.2f", added);
      std::snprintf(added_us, sizeof added_us, "%.1f", added * 1000 / static_cast<double>(r.per_customer));
    }
    const std::string lat = ratio_text(rm.p50(), d.p50()) + " " + ratio_text(rm.p99(), d.p99());
    const std::string be = cpu_us(rm.backend_cpu_s) + "/" + cpu_us(d.backend_cpu_s);
    std::printf("%15lld %9lld %7lld %18s %18s %15s %13s %14s %14s %15s %5zu %s\n",
                static_cast<long long>(r.per_customer), static_cast<long long>(r.customers),
                static_cast<long long>(r.updated), ms_pair(rm.ms).c_str(), ms_pair(d.ms).c_str(), lat.c_str(),
                added_ms, added_us, cpu_us(rm.remold_cpu_s).c_str(), be.c_str(), rm.ms.size(), check.c_str());
  }
  std::printf(
      "\n  p50/p99 ms = latency of the client's update_one (with n <= 100 updates, p99 is the slowest);\n"
      "  remold's call returns once every copy is synced. added p50 = remold p50 - direct p50, per\n"
      "  order of the customer in added us/order. rm cpu / be cpu = CPU microseconds of remold / the\n"
      "  backend per update (? = pid not given). updated = distinct customers renamed (timed and\n"
      "  warm-up). check: the renamed customers' names on both sides, and every order of theirs on\n"
      "  bench_extref holding the copy of its customer as stored now, on the backend directly.\n");
  for (const FanRow& r : rows) {
    const SideSamples& rm = r.timed[kFanRemold];
    const SideSamples& d = r.timed[kFanDirect];
    const double added = rm.p50() >= 0 && d.p50() >= 0 ? rm.p50() - d.p50() : NAN;
    print_bench_json(JsonObject()
                         .add("bench", "extref_fanout").add("orders_per_customer", r.per_customer)
                         .add("customers", r.customers).add("updated", r.updated)
                         .raw("update_remold", side_json(rm))
                         .raw("update_direct", side_json(d))
                         .raw("remold_vs_direct_p50", ratio_json(rm.p50(), d.p50()))
                         .raw("remold_vs_direct_p99", ratio_json(rm.p99(), d.p99()))
                         .raw("added_p50_ms", signed_json(added))
                         .raw("added_us_per_order", signed_json(added * 1000 / static_cast<double>(r.per_customer)))
                         .add("orders_checked", r.synced)
                         .add("errors", r.failures.count).add("ok", r.ok()).add("load1", r.load1)
                         .add("cores", usable_cores()));
  }
  std::fflush(stdout);
}

// ---- the run ---------------------------------------------------------------------

bool ExtendedReferenceScenario::run(Harness& h) {
  seed(h);
  const bool reads_ok = !opt_.run_read || run_reads(h);
  const bool inserts_ok = !opt_.run_insert || run_inserts(h);
  const bool fanouts_ok = !opt_.run_fanout || run_fanouts(h);
  const bool check_ok = final_check(h);
  return reads_ok && inserts_ok && fanouts_ok && check_ok;
}

// Dropped directly: remold refuses a drop of customers that still have
// documents (their copies would stay behind).
void ExtendedReferenceScenario::clean_up(Harness& h) {
  for (const char* db : {kRuledDb, kDirectDb})
    command(h.admin(Via::direct), db, json(R"({"dropDatabase": 1})").get(), true);
}

}  // namespace
}  // namespace extended_reference_bench

int main(int argc, char** argv) {
  extended_reference_bench::ExtendedReferenceScenario scenario;
  return bench_common::run_pattern_bench(argc, argv, scenario);
}
