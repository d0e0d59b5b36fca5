// attribute_bench: queries on sparse product attributes through remold's
// attribute rule against the same queries on a flat collection sent
// directly to the backend, with the same client code in the same run. The
// scaffolding (flags, header, connections, CPU, rounds) is
// pattern_harness's; the products are attribute_catalog's.
//
// Contract:
//   - The ruled side is bench_attr.products, dropped and loaded through
//     remold (so it is stored as {_id, name, price, category, specs: [{k, v}]}
//     with remold's {specs.k: 1, specs.v: 1} index). The flat side is
//     bench_flat.products on --direct, dropped and loaded directly, with no
//     index but _id's. Both hold the same generated products; sizes load
//     incrementally (the first 10,000 products of 100,000 are the 10,000).
//   - Before anything is timed the bench checks that the rule is active (the
//     documents stored on the backend carry the array, not the attributes).
//   - Per size and query shape: untimed warm-up, one verification query per
//     side (returned count, and an order-independent digest of the returned
//     documents' bytes: remold unfolds the pairs back into fields in their
//     original order, so a product must come back byte for byte as the flat
//     collection holds it), then timed rounds of one query per side, the
//     order rotating, then explain with executionStats on both sides.
//   - Prints a table and one "BENCH_JSON {...}" line per row; run() is true
//     when every query succeeded and every row's returned count and content
//     agreed (remold = flat = the count computed from the generated data).
#include "attribute_catalog.h"
#include "batch_load.h"
#include "bench_common.h"
#include "bench_mongoc.h"
#include "bench_report.h"
#include "explain_stats.h"
#include "failures.h"
#include "pattern_harness.h"
#include "timed_rounds.h"

#include <bson/bson.h>
#include <mongoc/mongoc.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace attribute_bench {
namespace {

using namespace bench_common;

constexpr const char* kAttrDb = "bench_attr";
constexpr const char* kFlatDb = "bench_flat";
constexpr const char* kColl = "products";

const char kRule[] =
    "namespace: bench_attr.products\n"
    "pattern: attribute\n"
    "attribute:\n"
    "  array: specs\n"
    "  except: [name, price, category]\n";

const char kOptions[] =
    "  --sizes 10000,100000 product counts, loaded incrementally (default 10000,100000)\n"
    "  --shapes a,b         query shapes to run (default all): eq-rare, range-common,\n"
    "                       in, and2, fixed (the control: no attribute in the filter)\n"
    "  --seconds S          timed seconds per size and shape, all sides together,\n"
    "                       at least (default 2.5)\n"
    "  --min-rounds N       timed rounds per cell (one query per side), at least\n"
    "                       (default 15)\n"
    "  --max-rounds N       and at most (default 400)\n"
    "  --max-cell-seconds S stop a cell of slow queries after S seconds, once it has\n"
    "                       3 rounds (default 18)\n"
    "  --warmup N           untimed queries per side per cell (default 1)\n"
    "  --no-stored          do not time the 'stored' side (the rewritten $elemMatch\n"
    "                       filter sent directly to bench_attr.products)\n"
    "  --initial-warmup S   untimed seconds of all shapes on every side after the first\n"
    "                       load, before the first cell (default 3; JIT of a JVM backend)\n"
    "  --batch N            products per insertMany while loading (default 1000)\n";

struct Options {
  std::vector<int64_t> sizes{10000, 100000};
  std::vector<std::string> shapes;  // empty: all
  RoundLimits rounds{.min_rounds = 15, .max_rounds = 400, .seconds = 2.5, .max_seconds = 18,
                     .rounds_before_cutoff = 3};
  int warmup = 1;             // untimed queries per side per cell, before verification
  bool stored = true;         // also time the rewritten filter sent directly
  double initial_warmup = 3;  // untimed seconds of every shape on both sides, once
  int batch = 1000;           // products per insertMany while loading
};

// ---- query shapes ----------------------------------------------------------

struct Shape {
  std::string name;
  std::string what;
  std::string filter;                           // the client's filter, as JSON
  std::string stored_filter;                    // the $elemMatch form remold sends (docs/patterns/attribute.md)
  std::function<bool(const Product&)> matches;  // the same predicate, for the expected count
};

const std::vector<Shape>& all_shapes() {
  static const std::vector<Shape> shapes = {
      {"eq-rare", "equality on a rare attribute (fridges only)", R"({"capacity_l": 350})",
       R"({"specs": {"$elemMatch": {"k": "capacity_l", "v": 350}}})",
       [](const Product& p) { return p.num("capacity_l") == 350.0; }},
      {"range-common", "range on a common attribute (~half the products have it)",
       R"({"screen_in": {"$gte": 15, "$lte": 17}})",
       R"({"specs": {"$elemMatch": {"k": "screen_in", "v": {"$gte": 15, "$lte": 17}}}})",
       [](const Product& p) {
         auto v = p.num("screen_in");
         return v && *v >= 15 && *v <= 17;
       }},
      {"in", "$in on an attribute", R"({"ram_gb": {"$in": [32, 64]}})",
       R"({"specs": {"$elemMatch": {"k": "ram_gb", "v": {"$in": [32, 64]}}}})",
       [](const Product& p) {
         auto v = p.num("ram_gb");
         return v && (*v == 32 || *v == 64);
       }},
      {"and2", "$and of two attributes",
       R"({"$and": [{"water_resistance": "IP68"}, {"storage_gb": {"$gte": 256}}]})",
       R"({"$and": [{"specs": {"$elemMatch": {"k": "water_resistance", "v": "IP68"}}},)"
       R"( {"specs": {"$elemMatch": {"k": "storage_gb", "v": {"$gte": 256}}}}]})",
       [](const Product& p) {
         auto s = p.num("storage_gb");
         return p.str("water_resistance") == "IP68" && s && *s >= 256;
       }},
      {"fixed", "control: fixed fields only, no attribute in the filter",
       R"({"category": "fridge", "price": {"$lt": 800}})",
       R"({"category": "fridge", "price": {"$lt": 800}})",
       [](const Product& p) { return p.category == "fridge" && p.price < 800; }},
  };
  return shapes;
}

bool is_shape(const std::string& name) {
  return std::any_of(all_shapes().begin(), all_shapes().end(),
                     [&](const Shape& s) { return s.name == name; });
}

// ---- sides -----------------------------------------------------------------

// remold: the client's filter on bench_attr.products through remold.
// flat: the client's filter on bench_flat.products, directly.
// stored: the rewritten ($elemMatch) filter on bench_attr.products, directly:
//   what remold sends, without remold; it splits remold/flat into what the
//   layout costs the backend (stored/flat) and what remold adds (remold/stored).
enum Side { kRemold = 0, kFlat = 1, kStored = 2 };
constexpr int kSides = 3;
const char* side_name(int s) { return s == kRemold ? "remold" : s == kFlat ? "flat" : "stored"; }
const char* side_db(int s) { return s == kFlat ? kFlatDb : kAttrDb; }
Via side_via(int s) { return s == kRemold ? Via::remold : Via::direct; }

// FNV-1a over a document's bytes; summed over a result it is independent of
// the order the documents come back in.
uint64_t doc_hash(const bson_t* doc) {
  const uint8_t* data = bson_get_data(doc);
  uint64_t h = 0xcbf29ce484222325ULL;
  for (uint32_t i = 0; i < doc->len; ++i) h = (h ^ data[i]) * 0x100000001b3ULL;
  return mix(h);
}

struct QueryOutcome {
  bool ok = false;
  int64_t returned = 0;
  uint64_t digest = 0;
  double ms = 0;
  std::string error;
  std::string first_doc;  // JSON of one returned document (verification runs)
};

struct Row {
  int64_t products = 0;
  const Shape* shape = nullptr;
  int64_t expected = 0;
  int64_t returned[kSides] = {-1, -1, -1};
  bool content_equal = false;
  std::string verify_message;
  SideSamples timed[kSides];  // the timed queries of every side
  ExplainStats explain[2];                       // remold, flat
  Failures failures;
  double load = 0;
  bool counts_ok() const {
    return returned[kRemold] == expected && returned[kFlat] == expected &&
           returned[kStored] == expected;
  }
  bool ok() const { return counts_ok() && content_equal && failures.count == 0; }
  void note(int side, const QueryOutcome& q) {
    if (!q.ok) failures.add(std::string(side_name(side)) + ": " + q.error);
  }
};

class AttributeScenario : public PatternScenario {
 public:
  const char* program() const override { return "attribute_bench"; }
  const char* rule() const override { return kRule; }
  const char* options() const override { return kOptions; }
  std::vector<std::string_view> switches() const override { return {"--no-stored"}; }
  bool set_option(const std::string& flag, const std::string& value) override;
  void check_options() override;
  void describe() const override;
  bool run(Harness& h) override;
  void clean_up(Harness& h) override;

 private:
  std::vector<int> sides() const;
  void describe_data(const std::vector<const Shape*>& shapes) const;
  JsonObject load(Harness& h, int64_t from, int64_t to);
  void check_storage(Harness& h, int64_t products);
  void warm_up(const std::vector<const Shape*>& shapes);
  QueryOutcome query(int side, const bson_t* filter, bool verify);
  Row run_cell(Harness& h, int64_t products, const Shape& shape);
  void print_row(const Row& r) const;
  void print_json(const Row& r) const;
  void print_notes(const std::vector<Row>& rows) const;

  Options opt_;
  ClientPtr client_[kSides];  // the query connections: remold, direct, direct
  std::vector<Product> products_;
};

bool AttributeScenario::set_option(const std::string& flag, const std::string& value) {
  auto int_arg = [&](int lo, int hi) { return static_cast<int>(parse_int(flag, value, lo, hi)); };
  if (flag == "--no-stored") opt_.stored = false;
  else if (flag == "--sizes") {
    opt_.sizes = parse_int_list(flag, value, 1, 10'000'000);
    std::sort(opt_.sizes.begin(), opt_.sizes.end());
    opt_.sizes.erase(std::unique(opt_.sizes.begin(), opt_.sizes.end()), opt_.sizes.end());
  } else if (flag == "--shapes") {
    opt_.shapes = split_list(value);
    if (opt_.shapes.empty()) usage_error("--shapes is empty");
    for (const auto& s : opt_.shapes)
      if (!is_shape(s)) usage_error("unknown shape '" + s + "'");
  } else if (flag == "--seconds") opt_.rounds.seconds = parse_number(flag, value, true);
  else if (flag == "--min-rounds") opt_.rounds.min_rounds = int_arg(1, 100000);
  else if (flag == "--max-rounds") opt_.rounds.max_rounds = int_arg(1, 1000000);
  else if (flag == "--max-cell-seconds") opt_.rounds.max_seconds = parse_number(flag, value);
  else if (flag == "--initial-warmup") opt_.initial_warmup = parse_number(flag, value, true);
  else if (flag == "--warmup") opt_.warmup = int_arg(0, 1000);
  else if (flag == "--batch") opt_.batch = int_arg(1, 100000);
  else return false;
  return true;
}

void AttributeScenario::check_options() {
  if (opt_.rounds.max_rounds < opt_.rounds.min_rounds)
    usage_error("--max-rounds is below --min-rounds");
}

std::vector<int> AttributeScenario::sides() const {
  if (opt_.stored) return {kRemold, kFlat, kStored};
  return {kRemold, kFlat};
}

void AttributeScenario::describe() const {
  std::printf("  remold: bench_attr.products, loaded and queried through remold\n");
  std::printf("  flat: bench_flat.products on the backend directly, the same products as plain\n"
              "    fields, no index but _id's\n");
  if (opt_.stored)
    std::printf("  stored: the rewritten filter remold sends ({specs: {$elemMatch: {k, v}}}) on\n"
                "    bench_attr.products, sent directly: the layout's cost without remold\n");
  std::printf("  queries: one connection per side, one query at a time: find(filter) with\n"
              "    default batch sizes, cursor read to the end; latency is the first find to\n"
              "    the last getMore reply\n");
  std::printf("  %.3g s of untimed queries (every shape, every side) after the first load\n",
              opt_.initial_warmup);
  std::printf("  cells: per size and shape, %d untimed queries per side, one verification\n"
              "    query per side, then rounds of one query per side, the order rotating\n"
              "    through every permutation, for at least %.3g s and %d rounds (at most %d;\n"
              "    a cell of slow queries stops after %.3g s once it has 3 rounds), then\n"
              "    explain executionStats of the remold and flat queries\n",
              opt_.warmup, opt_.rounds.seconds, opt_.rounds.min_rounds, opt_.rounds.max_rounds,
              opt_.rounds.max_seconds);
}

// How sparse the attributes are, over the largest load, and the shapes run.
void AttributeScenario::describe_data(const std::vector<const Shape*>& shapes) const {
  const int64_t largest = static_cast<int64_t>(products_.size());
  std::map<std::string, int64_t> present;
  size_t total_attrs = 0;
  for (const auto& p : products_) {
    total_attrs += p.attrs.size();
    for (const auto& [k, v] : p.attrs) ++present[k];
  }
  std::printf("  data: %lld products {_id, name, price, category, <attributes>}, %.1f attributes "
              "per product on average;\n  attribute presence over all products:\n",
              static_cast<long long>(largest),
              static_cast<double>(total_attrs) / static_cast<double>(largest));
  std::string line = "   ";
  for (const auto& name : kAttributeNames) {
    char item[48];
    std::snprintf(item, sizeof item, " %s %.1f%%", name.c_str(),
                  100.0 * static_cast<double>(present[name]) / static_cast<double>(largest));
    if (line.size() + std::strlen(item) > 96) {
      std::printf("%s\n", line.c_str());
      line = "   ";
    }
    line += item;
  }
  std::printf("%s\n", line.c_str());
  std::printf("  query shapes (remold and flat get the same filter; stored gets the second):\n");
  for (const Shape* s : shapes) {
    std::printf("    %-13s %s:\n      %s\n", s->name.c_str(), s->what.c_str(), s->filter.c_str());
    if (opt_.stored && s->stored_filter != s->filter)
      std::printf("      %s\n", s->stored_filter.c_str());
  }
  std::printf("\n");
}

// Inserts products [from, to) through remold and directly into the flat
// collection (documents built before the clock starts), prints how long
// each took, and returns the load's BENCH_JSON object.
JsonObject AttributeScenario::load(Harness& h, int64_t from, int64_t to) {
  LoadTiming timing[2];
  for (int side : {kRemold, kFlat}) {
    Documents docs;
    docs.reserve(static_cast<size_t>(to - from));
    for (int64_t i = from; i < to; ++i) docs.add(product_bson(products_[i]));
    CollectionPtr coll = collection(client_[side].get(), side_db(side), kColl);
    timing[side] = load_in_batches(coll.get(), docs, opt_.batch, h.cpu(),
                                   std::string(side_name(side)) + " products from " +
                                       std::to_string(from));
  }
  const double n = static_cast<double>(to - from);
  auto cpu = [](double v) { return fixed_or_unknown(v, 2); };
  std::printf("loaded products %lld..%lld (insertMany of %d, unordered):\n"
              "  through remold %.2f s (%.0f/s; CPU s remold %s, backend %s), flat directly "
              "%.2f s (%.0f/s; CPU s backend %s)\n",
              static_cast<long long>(from), static_cast<long long>(to - 1), opt_.batch,
              timing[kRemold].seconds, n / timing[kRemold].seconds,
              cpu(timing[kRemold].cpu.remold).c_str(), cpu(timing[kRemold].cpu.backend).c_str(),
              timing[kFlat].seconds, n / timing[kFlat].seconds,
              cpu(timing[kFlat].cpu.backend).c_str());
  auto cpu_json = [](const CpuSeconds& c) {
    return JsonObject()
        .raw("remold", number_or_null(c.remold, "%.2f"))
        .raw("backend", number_or_null(c.backend, "%.2f"))
        .str();
  };
  return JsonObject()
      .add("bench", "attribute_load").add("from", from).add("to", to)
      .raw("remold_seconds", number_or_null(timing[kRemold].seconds, "%.4f"))
      .raw("flat_seconds", number_or_null(timing[kFlat].seconds, "%.4f"))
      .raw("remold_per_s", number_or_null(n / timing[kRemold].seconds, "%.1f"))
      .raw("flat_per_s", number_or_null(n / timing[kFlat].seconds, "%.1f"))
      .raw("remold_side_cpu_s", cpu_json(timing[kRemold].cpu))
      .raw("flat_side_cpu_s", cpu_json(timing[kFlat].cpu))
      .raw("load1", number_or_null(load_average(), "%.2f"));
}

// Counts on both sides and the stored shape of the ruled collection: if the
// rule is not active, the bench would compare flat against flat.
void AttributeScenario::check_storage(Harness& h, int64_t products) {
  mongoc_client_t* direct = h.admin(Via::direct);
  auto count_of = [&](mongoc_client_t* c, const char* db) { return count_all(c, db, "products", nullptr); };
  const int64_t flat = count_of(direct, kFlatDb);
  const int64_t stored = count_of(direct, kAttrDb);
  const int64_t logical = count_of(h.admin(Via::remold), kAttrDb);
  if (flat != products || stored != products || logical != products)
    throw std::runtime_error("after loading " + std::to_string(products) +
                             " products: flat has " + std::to_string(flat) +
                             ", the ruled collection on the backend " + std::to_string(stored) +
                             ", count through remold " + std::to_string(logical));
  // Product 0 as stored on the backend: must carry specs, not attributes.
  auto cmd = json(R"({"find": "products", "filter": {"_id": 0}, "limit": 1, "singleBatch": true})");
  auto reply = command(direct, kAttrDb, cmd.get());
  bson_iter_t it, doc;
  bson_t stored_doc;
  bool has_specs = false, has_attribute = false;
  std::string stored_json = "?";
  if (bson_iter_init(&it, reply.get()) &&
      bson_iter_find_descendant(&it, "cursor.firstBatch.0", &doc) && BSON_ITER_HOLDS_DOCUMENT(&doc)) {
    uint32_t len;
    const uint8_t* data;
    bson_iter_document(&doc, &len, &data);
    if (bson_init_static(&stored_doc, data, len)) {
      stored_json = to_json(&stored_doc);
      has_specs = bson_has_field(&stored_doc, "specs");
      for (const auto& [k, v] : products_[0].attrs)
        has_attribute = has_attribute || bson_has_field(&stored_doc, k.c_str());
    }
  }
  if (!has_specs || has_attribute)
    throw std::runtime_error("bench_attr.products is not stored by the attribute rule (product 0 "
                             "on the backend: " + stored_json + "); is remold running with the rule "
                             "shown above in its --rules directory?");
  if (products == opt_.sizes.front())
    std::printf("  product 0 as stored on the backend: %s\n", stored_json.c_str());
  auto indexes = command(direct, kAttrDb, json(R"({"listIndexes": "products"})").get(), true);
  const std::string text = to_json(indexes.get());
  if (text.find("\"specs.k\" : 1, \"specs.v\" : 1") == std::string::npos)
    std::printf("  WARNING: bench_attr.products has no {specs.k: 1, specs.v: 1} index on the backend: "
                "%s\n", text.c_str());
}

// Untimed queries of every shape on every side, for the JIT of a JVM backend.
void AttributeScenario::warm_up(const std::vector<const Shape*>& shapes) {
  const auto start = Clock::now();
  int64_t queries = 0;
  while (seconds_since(start) < opt_.initial_warmup) {
    for (const Shape* shape : shapes) {
      auto filter = json(shape->filter);
      auto stored_filter = json(shape->stored_filter);
      for (int side : sides()) {
        QueryOutcome q = query(side, side == kStored ? stored_filter.get() : filter.get(), false);
        if (!q.ok)
          throw std::runtime_error(std::string("warm-up query ") + shape->name + " on " +
                                   side_name(side) + " failed: " + q.error);
        ++queries;
      }
    }
  }
  std::printf("warm-up: %lld untimed queries\n", static_cast<long long>(queries));
}

QueryOutcome AttributeScenario::query(int side, const bson_t* filter, bool verify) {
  QueryOutcome out;
  CollectionPtr coll = collection(client_[side].get(), side_db(side), kColl);
  const auto start = Clock::now();
  mongoc_cursor_t* cursor = mongoc_collection_find_with_opts(coll.get(), filter, nullptr, nullptr);
  const bson_t* doc;
  while (mongoc_cursor_next(cursor, &doc)) {
    ++out.returned;
    if (verify) {
      out.digest += doc_hash(doc);
      if (out.first_doc.empty()) out.first_doc = to_json(doc);
    }
  }
  bson_error_t error;
  out.ok = !mongoc_cursor_error(cursor, &error);
  mongoc_cursor_destroy(cursor);
  out.ms = ms_since(start);
  if (!out.ok) out.error = error.message;
  return out;
}

Row AttributeScenario::run_cell(Harness& h, int64_t products, const Shape& shape) {
  Row row;
  row.products = products;
  row.shape = &shape;
  for (int64_t i = 0; i < products; ++i) row.expected += shape.matches(products_[i]) ? 1 : 0;
  BsonPtr filters[kSides] = {json(shape.filter), json(shape.filter), json(shape.stored_filter)};

  // Warm-up, then one verification query per side.
  for (int w = 0; w < opt_.warmup; ++w)
    for (int side : sides()) row.note(side, query(side, filters[side].get(), false));
  QueryOutcome verify[kSides];
  for (int side : sides()) {
    verify[side] = query(side, filters[side].get(), true);
    row.note(side, verify[side]);
    row.returned[side] = verify[side].ok ? verify[side].returned : -1;
  }
  if (!opt_.stored) row.returned[kStored] = row.expected;  // not run: not checked
  row.content_equal = verify[kRemold].ok && verify[kFlat].ok &&
                      verify[kRemold].returned == verify[kFlat].returned &&
                      verify[kRemold].digest == verify[kFlat].digest;
  std::ostringstream msg;
  if (!row.counts_ok()) {
    msg << "returned remold " << row.returned[kRemold] << ", flat " << row.returned[kFlat];
    if (opt_.stored) msg << ", stored (direct $elemMatch) " << row.returned[kStored];
    msg << ", expected " << row.expected << "; ";
  }
  if (!row.content_equal && verify[kRemold].ok && verify[kFlat].ok)
    msg << "documents differ (first remold " << verify[kRemold].first_doc << ", first flat "
        << verify[kFlat].first_doc << "); ";
  row.verify_message = msg.str();

  auto timed_query = [&](int side) -> std::optional<double> {
    QueryOutcome q = query(side, filters[side].get(), false);
    row.note(side, q);
    if (q.ok && q.returned != row.expected)
      row.failures.add(std::string(side_name(side)) + ": a timed query returned " +
                       std::to_string(q.returned) + ", expected " + std::to_string(row.expected));
    if (!q.ok) return std::nullopt;
    return q.ms;
  };
  std::vector<SideSamples> samples = run_rounds(opt_.rounds, sides(), h.cpu(), [] {}, timed_query);
  for (int side : sides()) {
    row.timed[side] = std::move(samples[side]);
  }
  for (int side : {kRemold, kFlat})
    row.explain[side] = explain_find(client_[side].get(), side_db(side), kColl, filters[side].get());
  row.load = load_average();
  return row;
}

// CPU seconds per query as ms, -1 (unknown) kept.
double ms_of(double seconds) { return seconds >= 0 ? seconds * 1000 : -1; }

std::string explain_text(const ExplainStats& e) {
  char buf[64];
  switch (e.kind) {
    case ExplainStats::kStats:
      std::snprintf(buf, sizeof buf, "%.0f", e.docs_examined);
      return buf;
    case ExplainStats::kUnsupported: return "n/a";
    case ExplainStats::kFailed: return "error";
    default: return "?";
  }
}

std::string explain_json(const ExplainStats& e) {
  switch (e.kind) {
    case ExplainStats::kStats:
      return JsonObject()
          .add("docs_examined", e.docs_examined).add("keys_examined", e.keys_examined)
          .add("n_returned", e.returned).add("plan", e.plan)
          .str();
    case ExplainStats::kUnsupported: return "\"n/a (backend has no explain)\"";
    case ExplainStats::kFailed: return JsonObject().add("error", e.error).str();
    default: return "null";
  }
}

bool has_no_explain(const Row& r) {
  return r.explain[kRemold].kind == ExplainStats::kUnsupported &&
         r.explain[kFlat].kind == ExplainStats::kUnsupported;
}

void print_table_header() {
  std::printf("\n%9s %-12s %8s %5s %17s %15s %19s %17s %9s %9s %7s %13s %4s %s\n", "products",
              "shape", "returned", "sel%", "remold p50/p99 ms", "flat p50/p99 ms",
              "remold/flat p50 p99", "stored p50/p99 ms", "stor/flat", "rem/stor", "rm cpu",
              "docs exam R/F", "n", "check");
}

void AttributeScenario::print_row(const Row& r) const {
  const SideSamples& remold = r.timed[kRemold];
  const SideSamples& flat = r.timed[kFlat];
  const SideSamples& stored = r.timed[kStored];
  const std::string examined =
      has_no_explain(r) ? "n/a" : explain_text(r.explain[kRemold]) + "/" + explain_text(r.explain[kFlat]);
  std::string check;
  if (r.ok()) {
    check = "counts equal, content equal";
  } else {
    check = "FAILED: " + r.verify_message;
    check += r.failures.text("queries");
  }
  const std::string ratios = ratio_text(remold.p50(), flat.p50()) + " " + ratio_text(remold.p99(), flat.p99());
  std::printf("%9lld %-12s %8lld %5.2f %17s %15s %19s %17s %9s %9s %7s %13s %4zu %s\n",
              static_cast<long long>(r.products), r.shape->name.c_str(),
              static_cast<long long>(r.returned[kRemold]),
              100.0 * static_cast<double>(r.expected) / static_cast<double>(r.products),
              ms_pair(remold.ms).c_str(), ms_pair(flat.ms).c_str(), ratios.c_str(),
              ms_pair(stored.ms).c_str(), ratio_text(stored.p50(), flat.p50()).c_str(),
              ratio_text(remold.p50(), stored.p50()).c_str(),
              fixed_or_unknown(ms_of(remold.remold_cpu_s), 2).c_str(), examined.c_str(),
              remold.ms.size(), check.c_str());
  std::fflush(stdout);
}

void AttributeScenario::print_json(const Row& r) const {
  const SideSamples& remold = r.timed[kRemold];
  const SideSamples& flat = r.timed[kFlat];
  const SideSamples& stored = r.timed[kStored];
  auto ratio = [](double a, double b) { return b > 0 && a > 0 ? number_or_null(a / b) : "null"; };
  JsonObject j;
  j.add("bench", "attribute_query").add("products", r.products).add("shape", r.shape->name)
      .raw("filter", r.shape->filter).raw("stored_filter", r.shape->stored_filter)
      .add("expected", r.expected).add("returned_remold", r.returned[kRemold])
      .add("returned_flat", r.returned[kFlat]);
  if (opt_.stored) j.add("returned_stored", r.returned[kStored]);
  JsonObject cpu;
  for (int side : sides())
    cpu.raw(side_name(side), JsonObject()
                                 .raw("remold", number_or_null(ms_of(r.timed[side].remold_cpu_s)))
                                 .raw("backend", number_or_null(ms_of(r.timed[side].backend_cpu_s)))
                                 .str());
  j.add("counts_equal", r.counts_ok()).add("content_equal", r.content_equal)
      .add("samples", remold.ms.size())
      .raw("remold_p50_ms", number_or_null(remold.p50()))
      .raw("remold_p99_ms", number_or_null(remold.p99()))
      .raw("flat_p50_ms", number_or_null(flat.p50()))
      .raw("flat_p99_ms", number_or_null(flat.p99()))
      .raw("ratio_p50", ratio(remold.p50(), flat.p50()))
      .raw("ratio_p99", ratio(remold.p99(), flat.p99()))
      .raw("stored_p50_ms", number_or_null(stored.p50()))
      .raw("stored_p99_ms", number_or_null(stored.p99()))
      .raw("stored_vs_flat_p50", ratio(stored.p50(), flat.p50()))
      .raw("remold_vs_stored_p50", ratio(remold.p50(), stored.p50()))
      .raw("docs_examined", JsonObject()
                                .raw("remold", explain_json(r.explain[kRemold]))
                                .raw("flat", explain_json(r.explain[kFlat]))
                                .str())
      .raw("cpu_ms_per_query", cpu.str())
      .add("errors", r.failures.count).add("ok", r.ok()).add("load1", r.load)
      .add("cores", usable_cores());
  print_bench_json(j);
}

void AttributeScenario::print_notes(const std::vector<Row>& rows) const {
  std::printf(
      "\n  p50/p99 = latency of one find read to the end, in ms (with n <= 100 queries, p99 is\n"
      "  the slowest one). remold/flat = remold's percentile / flat's (above 1: remold slower).\n"
      "  stored = the rewritten $elemMatch filter sent directly to the ruled collection;\n"
      "  stor/flat = what the {k, v} layout costs this backend, rem/stor = what remold adds\n"
      "  (the hop, the rewrite, unfolding the replies), both at p50. rm cpu = remold's CPU ms\n"
      "  per remold-side query (? = pid not given). docs exam R/F = explain executionStats\n"
      "  totalDocsExamined of the remold query (rewritten by remold) / the flat query. n = timed\n"
      "  queries per side. check: returned counts of every side against the count computed\n"
      "  from the generated data, and remold's documents against flat's byte for byte\n"
      "  (order-independent digest).\n");
  if (std::all_of(rows.begin(), rows.end(), has_no_explain))
    std::printf("  docs examined: n/a (backend has no explain)\n");
  for (const Row& r : rows) {
    for (int side : {kRemold, kFlat}) {
      const ExplainStats& e = r.explain[side];
      if (e.kind == ExplainStats::kStats)
        std::printf("  explain %lld %s %s: docs %.0f, keys %.0f, returned %.0f, plan %s\n",
                    static_cast<long long>(r.products), r.shape->name.c_str(), side_name(side),
                    e.docs_examined, e.keys_examined, e.returned, e.plan.c_str());
      else if (e.kind == ExplainStats::kFailed)
        std::printf("  explain %lld %s %s failed: %s\n", static_cast<long long>(r.products),
                    r.shape->name.c_str(), side_name(side), e.error.c_str());
    }
  }
  std::printf("\n");
}

bool AttributeScenario::run(Harness& h) {
  for (int side = 0; side < kSides; ++side) client_[side] = h.connect(side_via(side));

  std::vector<const Shape*> shapes;
  for (const Shape& s : all_shapes())
    if (opt_.shapes.empty() || std::find(opt_.shapes.begin(), opt_.shapes.end(), s.name) != opt_.shapes.end())
      shapes.push_back(&s);
  const int64_t largest = opt_.sizes.back();
  products_.reserve(largest);
  for (int64_t i = 0; i < largest; ++i) products_.push_back(make_product(i));
  describe_data(shapes);

  clean_up(h);  // start empty
  std::vector<Row> rows;
  std::vector<JsonObject> load_lines;  // printed after the rows'
  int64_t loaded = 0;
  for (int64_t size : opt_.sizes) {
    load_lines.push_back(load(h, loaded, size));
    loaded = size;
    check_storage(h, size);
    if (size == opt_.sizes.front() && opt_.initial_warmup > 0) warm_up(shapes);
    std::fflush(stdout);
    for (const Shape* shape : shapes) {
      rows.push_back(run_cell(h, size, *shape));
      const Row& r = rows.back();
      char stored[48] = "";
      if (opt_.stored)
        std::snprintf(stored, sizeof stored, ", stored %.2f ms", r.timed[kStored].p50());
      std::printf("  %lld %s: %zu rounds, p50 remold %.2f ms, flat %.2f ms%s%s%s\n",
                  static_cast<long long>(size), shape->name.c_str(), r.timed[kRemold].ms.size(),
                  r.timed[kRemold].p50(), r.timed[kFlat].p50(), stored,
                  r.ok() ? "" : "; FAILED: ", r.ok() ? "" : (r.verify_message + r.failures.first).c_str());
      std::fflush(stdout);
    }
  }

  print_table_header();
  for (const Row& r : rows) print_row(r);
  print_notes(rows);
  for (const Row& r : rows) print_json(r);
  for (const auto& line : load_lines) print_bench_json(line);
  return std::all_of(rows.begin(), rows.end(), [](const Row& r) { return r.ok(); });
}

// The ruled collection is dropped through remold, so remold forgets that it
// ensured its index and ensures it again on the first insert.
void AttributeScenario::clean_up(Harness& h) {
  command(h.admin(Via::remold), kAttrDb, json(R"({"drop": "products"})").get(), true);
  command(h.admin(Via::direct), kFlatDb, json(R"({"drop": "products"})").get(), true);
}

}  // namespace
}  // namespace attribute_bench

int main(int argc, char** argv) {
  attribute_bench::AttributeScenario scenario;
  return bench_common::run_pattern_bench(argc, argv, scenario);
}
