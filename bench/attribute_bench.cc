// attribute_bench: queries on sparse product attributes through remold's
// attribute rule against the same queries on a flat collection sent
// directly to the backend, with the same client code (mongo-c-driver) in
// the same run.
//
// Contract:
//   - remold (--proxy) must run with the attribute rule printed in the
//     header: bench_attr.products, array specs, except [name, price,
//     category]. bench/attribute_run.sh writes that rule and starts remold
//     with it.
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
//     collection holds it), then timed queries alternating remold and flat
//     (R F F R ...), then explain with executionStats on both sides.
//   - Prints a table and one "BENCH_JSON {...}" line per row. Exit status:
//     0 when every query succeeded and every row's returned count and content
//     agreed (remold = flat = the count computed from the generated data),
//     1 otherwise, 2 on bad arguments.
#include "bench_common.h"
#include "bench_mongoc.h"

#include <bson/bson.h>
#include <mongoc/mongoc.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

namespace attribute_bench {
namespace {

using namespace bench_common;

using Clock = std::chrono::steady_clock;

constexpr const char* kAttrDb = "bench_attr";
constexpr const char* kFlatDb = "bench_flat";
constexpr const char* kColl = "products";

const char kRuleText[] =
    "namespace: bench_attr.products\n"
    "pattern: attribute\n"
    "attribute:\n"
    "  array: specs\n"
    "  except: [name, price, category]\n";

struct Config {
  std::string direct;
  std::string proxy;
  std::vector<int64_t> sizes{10000, 100000};
  std::vector<std::string> shapes;  // empty: all
  double seconds = 2.5;   // timed seconds per cell (all sides together), at least
  int min_rounds = 15;    // timed rounds (one query per side) per cell, at least
  int max_rounds = 400;   // and at most
  double max_cell_seconds = 18;  // a cell of slow queries stops here (after 3 rounds)
  int warmup = 1;         // untimed queries per side per cell, before verification
  bool stored = true;     // also time the rewritten filter sent directly
  double initial_warmup = 3;  // untimed seconds of every shape on both sides, once
  int batch = 1000;       // products per insertMany while loading
  bool keep = false;
  int remold_pid = 0;
  int backend_pid = 0;
};

// ---- arguments -------------------------------------------------------------

const char kUsage[] =
    "usage: attribute_bench --direct HOST:PORT --proxy HOST:PORT [options]\n"
    "  --direct HOST:PORT   the backend (flat collection, storage checks)\n"
    "  --proxy HOST:PORT    remold, running the attribute rule for bench_attr.products\n"
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
    "  --batch N            products per insertMany while loading (default 1000)\n"
    "  --keep               leave both collections in place at the end\n"
    "  --remold-pid PID     report remold's CPU time per query (local runs)\n"
    "  --backend-pid PID    report the backend's CPU time per query (local runs)\n";

const std::vector<std::string>& shape_names();

Config parse_args(int argc, char** argv) {
  set_usage("attribute_bench", kUsage);
  Config cfg;
  parse_flags(argc, argv, {"--keep", "--no-stored"}, [&](const std::string& flag,
                                                         const std::string& value) {
    if (flag == "--keep") cfg.keep = true;
    else if (flag == "--no-stored") cfg.stored = false;
    else if (flag == "--direct") check_endpoint(flag, cfg.direct = value);
    else if (flag == "--proxy") check_endpoint(flag, cfg.proxy = value);
    else if (flag == "--sizes") {
      cfg.sizes.clear();
      for (const auto& s : split_list(value)) cfg.sizes.push_back(parse_int(flag, s, 1, 10'000'000));
      if (cfg.sizes.empty()) usage_error("--sizes is empty");
      std::sort(cfg.sizes.begin(), cfg.sizes.end());
      cfg.sizes.erase(std::unique(cfg.sizes.begin(), cfg.sizes.end()), cfg.sizes.end());
    } else if (flag == "--shapes") {
      cfg.shapes = split_list(value);
      if (cfg.shapes.empty()) usage_error("--shapes is empty");
      for (const auto& s : cfg.shapes)
        if (std::find(shape_names().begin(), shape_names().end(), s) == shape_names().end())
          usage_error("unknown shape '" + s + "'");
    } else if (flag == "--seconds") cfg.seconds = parse_number(flag, value, true);
    else if (flag == "--min-rounds") cfg.min_rounds = static_cast<int>(parse_int(flag, value, 1, 100000));
    else if (flag == "--max-rounds") cfg.max_rounds = static_cast<int>(parse_int(flag, value, 1, 1000000));
    else if (flag == "--max-cell-seconds") cfg.max_cell_seconds = parse_number(flag, value);
    else if (flag == "--initial-warmup") cfg.initial_warmup = parse_number(flag, value, true);
    else if (flag == "--warmup") cfg.warmup = static_cast<int>(parse_int(flag, value, 0, 1000));
    else if (flag == "--batch") cfg.batch = static_cast<int>(parse_int(flag, value, 1, 100000));
    else if (flag == "--remold-pid") cfg.remold_pid = static_cast<int>(parse_int(flag, value, 1, 1 << 30));
    else if (flag == "--backend-pid") cfg.backend_pid = static_cast<int>(parse_int(flag, value, 1, 1 << 30));
    else usage_error("unknown argument '" + flag + "'");
  });
  if (cfg.direct.empty() || cfg.proxy.empty()) usage_error("--direct and --proxy are required");
  if (cfg.max_rounds < cfg.min_rounds) usage_error("--max-rounds is below --min-rounds");
  return cfg;
}

// ---- small helpers ---------------------------------------------------------


// ---- data ------------------------------------------------------------------
//
// A product catalog: a few fixed fields (name, price, category) and 20
// possible attributes, each present only in the categories it makes sense
// for, with a per-category probability. Product i is a pure function of i,
// so the first N products of a bigger load are exactly the N-product load.

using Value = std::variant<int64_t, double, std::string, bool>;

struct Product {
  int64_t id;
  std::string name;
  double price;
  std::string category;
  std::vector<std::pair<std::string, Value>> attrs;  // in document order

  const Value* get(const std::string& attr) const {
    for (const auto& [k, v] : attrs)
      if (k == attr) return &v;
    return nullptr;
  }
  std::optional<double> num(const std::string& attr) const {
    const Value* v = get(attr);
    if (!v) return std::nullopt;
    if (auto i = std::get_if<int64_t>(v)) return static_cast<double>(*i);
    if (auto d = std::get_if<double>(v)) return *d;
    return std::nullopt;
  }
  std::optional<std::string> str(const std::string& attr) const {
    const Value* v = get(attr);
    if (!v) return std::nullopt;
    if (auto s = std::get_if<std::string>(v)) return *s;
    return std::nullopt;
  }
};

uint64_t mix(uint64_t x) {  // splitmix64's finalizer
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Uniform in [0, 1), a pure function of (product, salt).
double uniform(int64_t i, int salt) {
  return static_cast<double>(mix(static_cast<uint64_t>(i) * 0x100000001b3ULL ^
                                 mix(static_cast<uint64_t>(salt))) >> 11) *
         0x1.0p-53;
}

template <typename T>
const T& pick(int64_t i, int salt, const std::vector<T>& items) {
  return items[static_cast<size_t>(uniform(i, salt) * static_cast<double>(items.size()))];
}

// Weighted pick: weights need not sum to 1.
template <typename T>
const T& pick_weighted(int64_t i, int salt, const std::vector<std::pair<T, double>>& items) {
  double total = 0;
  for (const auto& [_, w] : items) total += w;
  double u = uniform(i, salt) * total;
  for (const auto& [item, w] : items) {
    if (u < w) return item;
    u -= w;
  }
  return items.back().first;
}

const std::vector<std::pair<std::string, double>> kCategories = {
    {"laptop", 12}, {"phone", 14},  {"tv", 8},     {"monitor", 8}, {"headphones", 12},
    {"camera", 4},  {"fridge", 4},  {"shirt", 22}, {"shoes", 16}};

const std::vector<std::string> kAttributeNames = {
    "brand",      "color",       "weight_kg",  "warranty_years", "screen_in",
    "ram_gb",     "storage_gb",  "cpu",        "battery_mah",    "resolution",
    "refresh_hz", "hdmi_ports",  "wireless",   "noise_cancelling", "megapixels",
    "capacity_l", "energy_class", "material",  "size",           "water_resistance"};

Product make_product(int64_t i) {
  Product p;
  p.id = i;
  char name[32];
  std::snprintf(name, sizeof name, "product-%07lld", static_cast<long long>(i));
  p.name = name;
  p.category = pick_weighted(i, 1, kCategories);
  const std::string& c = p.category;
  auto is = [&](std::initializer_list<const char*> cats) {
    for (const char* x : cats)
      if (c == x) return true;
    return false;
  };
  auto present = [&](int salt, double prob) { return uniform(i, salt) < prob; };
  auto add = [&](const char* k, Value v) { p.attrs.emplace_back(k, std::move(v)); };
  auto cents = [](double v) { return std::round(v * 100.0) / 100.0; };

  // price: a per-category range, to the cent
  static const std::map<std::string, std::pair<double, double>> kPrice = {
      {"laptop", {400, 3000}}, {"phone", {150, 1500}},  {"tv", {250, 4000}},
      {"monitor", {120, 1500}}, {"headphones", {20, 450}}, {"camera", {300, 4000}},
      {"fridge", {350, 3000}}, {"shirt", {10, 120}},     {"shoes", {30, 250}}};
  const auto [lo, hi] = kPrice.at(c);
  p.price = cents(lo + (hi - lo) * uniform(i, 2) * uniform(i, 3));  // skewed to cheap

  const bool electronics = !is({"shirt", "shoes"});
  if (present(10, 0.95))
    add("brand", pick(i, 11, std::vector<std::string>{
                                 "Acme", "Globex", "Initech", "Umbrella", "Hooli", "Stark",
                                 "Wayne", "Tyrell", "Cyberdyne", "Soylent", "Wonka", "Vandelay",
                                 "Gringotts", "Monarch", "Aperture", "Nakatomi"}));
  {
    double prob = is({"shirt", "shoes"}) ? 0.95 : is({"phone", "headphones"}) ? 0.85
                : is({"laptop", "fridge"}) ? 0.55 : 0.0;
    if (present(12, prob))
      add("color", pick(i, 13, std::vector<std::string>{"black", "white", "silver", "grey", "red",
                                                       "blue", "green", "yellow", "pink",
                                                       "purple", "brown", "orange"}));
  }
  if (c != "shirt" && present(14, 0.85)) {
    static const std::map<std::string, std::pair<double, double>> kWeight = {
        {"laptop", {0.9, 3.2}}, {"phone", {0.13, 0.24}}, {"tv", {6, 45}},
        {"monitor", {2.5, 9}},  {"headphones", {0.02, 0.4}}, {"camera", {0.3, 1.6}},
        {"fridge", {45, 120}},  {"shoes", {0.4, 1.4}}};
    const auto [wl, wh] = kWeight.at(c);
    add("weight_kg", cents(wl + (wh - wl) * uniform(i, 15)));
  }
  if (electronics && present(16, 0.6))
    add("warranty_years", pick_weighted<int64_t>(i, 17, {{1, 0.45}, {2, 0.35}, {3, 0.12},
                                                          {5, 0.08}}));
  {
    std::vector<double> sizes;
    if (c == "laptop") sizes = {13.3, 14.0, 15.6, 16.0, 17.3};
    else if (c == "phone") sizes = {5.8, 6.1, 6.4, 6.7, 6.9};
    else if (c == "tv") sizes = {32, 43, 50, 55, 65, 75, 85};
    else if (c == "monitor") sizes = {21.5, 24, 27, 32, 34};
    else if (c == "camera") sizes = {3.0, 3.2};
    if (!sizes.empty() && present(18, c == "camera" ? 0.7 : 0.98))
      add("screen_in", pick(i, 19, sizes));
  }
  if (c == "laptop" && present(20, 0.95))
    add("ram_gb", pick_weighted<int64_t>(i, 21, {{8, 0.3}, {16, 0.35}, {32, 0.25}, {64, 0.1}}));
  if (c == "phone" && present(20, 0.8))
    add("ram_gb", pick_weighted<int64_t>(i, 21, {{4, 0.2}, {6, 0.25}, {8, 0.3}, {12, 0.15},
                                                 {16, 0.1}}));
  if (c == "laptop" && present(22, 0.95))
    add("storage_gb", pick<int64_t>(i, 23, {256, 512, 1024, 2048}));
  if (c == "phone" && present(22, 0.9))
    add("storage_gb", pick<int64_t>(i, 23, {64, 128, 256, 512, 1024}));
  if (c == "camera" && present(22, 0.3))
    add("storage_gb", pick<int64_t>(i, 23, {32, 64, 128}));
  if (c == "laptop" && present(24, 0.9))
    add("cpu", pick(i, 25, std::vector<std::string>{"i5-1335U", "i7-1360P", "i9-13900H",
                                                    "Ryzen 5 7530U", "Ryzen 7 7840U", "M3",
                                                    "M3 Pro"}));
  if ((c == "phone" && present(26, 0.9)) || (c == "headphones" && present(26, 0.5)))
    add("battery_mah", c == "phone" ? static_cast<int64_t>(3000 + 100 * std::floor(uniform(i, 27) * 21))
                                    : static_cast<int64_t>(300 + 50 * std::floor(uniform(i, 27) * 11)));
  if ((is({"tv", "monitor"}) && present(28, 0.95)) || (c == "camera" && present(28, 0.5)))
    add("resolution", pick_weighted<std::string>(
                          i, 29, c == "tv" ? std::vector<std::pair<std::string, double>>{
                                                 {"1080p", 0.3}, {"4k", 0.6}, {"8k", 0.1}}
                                           : std::vector<std::pair<std::string, double>>{
                                                 {"1080p", 0.45}, {"1440p", 0.35}, {"4k", 0.2}}));
  if (c == "monitor" && present(30, 0.8))
    add("refresh_hz", pick_weighted<int64_t>(i, 31, {{60, 0.35}, {75, 0.15}, {144, 0.3},
                                                      {165, 0.12}, {240, 0.08}}));
  if (c == "tv" && present(30, 0.5)) add("refresh_hz", pick<int64_t>(i, 31, {60, 120}));
  if ((c == "tv" && present(32, 0.9)) || (c == "monitor" && present(32, 0.7)))
    add("hdmi_ports", c == "tv" ? pick<int64_t>(i, 33, {2, 3, 4}) : pick<int64_t>(i, 33, {1, 2}));
  if ((c == "headphones" && present(34, 0.95)) || (c == "tv" && present(34, 0.3)))
    add("wireless", c == "tv" ? true : uniform(i, 35) < 0.7);
  if (c == "headphones" && present(36, 0.6)) add("noise_cancelling", uniform(i, 37) < 0.45);
  if ((c == "camera" && present(38, 0.95)) || (c == "phone" && present(38, 0.7)))
    add("megapixels", c == "camera" ? pick<int64_t>(i, 39, {20, 24, 33, 45, 61})
                                    : pick<int64_t>(i, 39, {12, 48, 50, 108, 200}));
  if (c == "fridge" && present(40, 0.95))
    add("capacity_l", pick<int64_t>(i, 41, {200, 250, 300, 350, 400, 450, 500, 600}));
  if ((c == "fridge" && present(42, 0.9)) || (c == "tv" && present(42, 0.7)) ||
      (c == "monitor" && present(42, 0.4)))
    add("energy_class", pick(i, 43, std::vector<std::string>{"A+++", "A++", "A+", "A", "B", "C"}));
  if (c == "shirt" && present(44, 0.9))
    add("material", pick(i, 45, std::vector<std::string>{"cotton", "linen", "polyester", "wool", "silk"}));
  if (c == "shoes" && present(44, 0.85))
    add("material", pick(i, 45, std::vector<std::string>{"leather", "canvas", "mesh", "suede"}));
  if (c == "shirt" && present(46, 0.98))
    add("size", pick(i, 47, std::vector<std::string>{"XS", "S", "M", "L", "XL", "XXL"}));
  if (c == "shoes" && present(46, 0.98))  // sizes are numbers here: one attribute, two types
    add("size", static_cast<int64_t>(36 + std::floor(uniform(i, 47) * 11)));
  if (c == "phone" && present(48, 0.6))
    add("water_resistance", pick(i, 49, std::vector<std::string>{"IP67", "IP68"}));
  if (c == "headphones" && present(48, 0.3))
    add("water_resistance", pick(i, 49, std::vector<std::string>{"IPX4", "IPX5"}));
  if (c == "camera" && present(48, 0.2)) add("water_resistance", std::string("IPX7"));
  return p;
}

// The product as the application writes it: fixed fields first, then the
// attributes as plain fields. (remold folds the attributes into specs and
// unfolds them back after the fixed fields, so this order round-trips.)
bson_t* product_bson(const Product& p) {
  bson_t* doc = bson_new();
  BSON_APPEND_INT64(doc, "_id", p.id);
  BSON_APPEND_UTF8(doc, "name", p.name.c_str());
  BSON_APPEND_DOUBLE(doc, "price", p.price);
  BSON_APPEND_UTF8(doc, "category", p.category.c_str());
  for (const auto& [k, v] : p.attrs) {
    if (auto i = std::get_if<int64_t>(&v)) BSON_APPEND_INT64(doc, k.c_str(), *i);
    else if (auto d = std::get_if<double>(&v)) BSON_APPEND_DOUBLE(doc, k.c_str(), *d);
    else if (auto s = std::get_if<std::string>(&v)) BSON_APPEND_UTF8(doc, k.c_str(), s->c_str());
    else BSON_APPEND_BOOL(doc, k.c_str(), std::get<bool>(v));
  }
  return doc;
}

// ---- query shapes ----------------------------------------------------------

struct Shape {
  std::string name;
  std::string what;
  std::string filter;                           // the client's filter, as JSON
  std::string stored_filter;                    // the $elemMatch form remold sends (README)
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

const std::vector<std::string>& shape_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& s : all_shapes()) out.push_back(s.name);
    return out;
  }();
  return names;
}

// ---- the bench -------------------------------------------------------------

// remold: the client's filter on bench_attr.products through remold.
// flat: the client's filter on bench_flat.products, directly.
// stored: the rewritten ($elemMatch) filter on bench_attr.products, directly:
//   what remold sends, without remold; it splits remold/flat into what the
//   layout costs the backend (stored/flat) and what remold adds (remold/stored).
enum Side { kRemold = 0, kFlat = 1, kStored = 2 };
constexpr int kSides = 3;
const char* side_name(int s) { return s == kRemold ? "remold" : s == kFlat ? "flat" : "stored"; }

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

struct ExplainOutcome {
  enum Kind { kNone, kStats, kUnsupported, kFailed } kind = kNone;
  double docs_examined = -1, keys_examined = -1, returned = -1;
  std::string plan;   // winning plan stages, outermost first
  std::string error;
};

struct LoadOutcome {
  double seconds = 0;
  double cpu_remold = -1, cpu_backend = -1;
};

struct Row {
  int64_t products = 0;
  const Shape* shape = nullptr;
  int64_t expected = 0;
  int64_t returned[kSides] = {-1, -1, -1};
  bool content_equal = false;
  std::string verify_message;
  std::vector<double> ms[kSides];
  double cpu_remold_ms[kSides] = {-1, -1, -1};   // remold CPU per query, during that side's queries
  double cpu_backend_ms[kSides] = {-1, -1, -1};  // backend CPU per query
  ExplainOutcome explain[2];                     // remold, flat
  uint64_t errors = 0;
  std::string first_error;
  double load = 0;
  bool counts_ok() const {
    return returned[kRemold] == expected && returned[kFlat] == expected &&
           returned[kStored] == expected;
  }
  bool ok() const { return counts_ok() && content_equal && errors == 0; }
};

class Bench {
 public:
  explicit Bench(const Config& cfg) : cfg_(cfg) {}
  int run();

 private:
  void print_header();
  void reset();
  LoadOutcome load_side(int side, int64_t from, int64_t to);
  void check_storage(int64_t products);
  QueryOutcome query(int side, const bson_t* filter, bool verify);
  ExplainOutcome explain(int side, const bson_t* filter);
  Row run_cell(int64_t products, const Shape& shape);
  void print_row(const Row& r);
  void print_json(const Row& r);

  const Config& cfg_;
  ClientPtr client_[kSides];  // the query connections: remold, direct, direct
  ClientPtr admin_;       // direct, for storage checks
  std::vector<Product> products_;
};

void Bench::print_header() {
  std::printf("attribute_bench: direct %s (backend), remold %s\n", cfg_.direct.c_str(),
              cfg_.proxy.c_str());
  std::printf("  remold rule (bench_attr.products, loaded and queried through remold):\n");
  std::istringstream rule(kRuleText);
  for (std::string line; std::getline(rule, line);) std::printf("    | %s\n", line.c_str());
  std::printf("  flat: bench_flat.products on the backend directly, the same products as plain\n"
              "    fields, no index but _id's\n");
  std::printf("  client: mongo-c-driver %s, one connection per side, one query at a time:\n"
              "    find(filter) with default batch sizes, cursor read to the end; latency is\n"
              "    the first find to the last getMore reply\n", mongoc_get_version());
  if (cfg_.stored)
    std::printf("  stored: the rewritten filter remold sends ({specs: {$elemMatch: {k, v}}}) on\n"
                "    bench_attr.products, sent directly: the layout's cost without remold\n");
  std::printf("  %.3g s of untimed queries (every shape, every side) after the first load\n",
              cfg_.initial_warmup);
  std::printf("  cells: per size and shape, %d untimed queries per side, one verification\n"
              "    query per side, then rounds of one query per side, the order rotating\n"
              "    (R F%s, F R%s, ...), for at least %.3g s and %d rounds (at most %d; a cell\n"
              "    of slow queries stops after %.3g s once it has 3 rounds), then explain\n"
              "    executionStats of the remold and flat queries\n",
              cfg_.warmup, cfg_.stored ? " S" : "", cfg_.stored ? " S" : "", cfg_.seconds,
              cfg_.min_rounds, cfg_.max_rounds, cfg_.max_cell_seconds);
  print_machine("  CAVEAT: the bench client, remold and the backend share these cores (on 2 cores\n"
                "  every cycle remold spends is taken from the backend or the client), and other\n"
                "  load on the machine moves every number: compare rows of the same run only.\n\n");
  std::fflush(stdout);
}

void Bench::reset() {
  // The ruled collection is dropped through remold, so remold forgets that
  // it ensured its index and ensures it again on the first insert.
  command(client_[kRemold].get(), kAttrDb, json(R"({"drop": "products"})").get(), true);
  command(admin_.get(), kFlatDb, json(R"({"drop": "products"})").get(), true);
}

// Inserts products [from, to) into one side (documents built before the
// clock starts); returns the seconds it took and the CPU seconds remold and
// the backend spent meanwhile (-1 when unknown).
LoadOutcome Bench::load_side(int side, int64_t from, int64_t to) {
  CollectionPtr coll(mongoc_client_get_collection(client_[side].get(),
                                                  side == kRemold ? kAttrDb : kFlatDb, kColl));
  auto opts = json(R"({"ordered": false})");
  std::vector<bson_t*> docs;
  docs.reserve(static_cast<size_t>(to - from));
  for (int64_t i = from; i < to; ++i) docs.push_back(product_bson(products_[i]));
  LoadOutcome out;
  const double r0 = process_cpu_seconds(cfg_.remold_pid), b0 = process_cpu_seconds(cfg_.backend_pid);
  const auto start = Clock::now();
  std::string failure;
  for (int64_t begin = from; begin < to && failure.empty(); begin += cfg_.batch) {
    const int64_t end = std::min<int64_t>(to, begin + cfg_.batch);
    bson_t reply;
    bson_error_t error;
    const bool ok = mongoc_collection_insert_many(
        coll.get(), const_cast<const bson_t**>(docs.data() + (begin - from)),
        static_cast<size_t>(end - begin), opts.get(), &reply, &error);
    const auto n = number_at(&reply, "insertedCount");
    if (!ok || !n || static_cast<int64_t>(*n) != end - begin)
      failure = std::string("loading ") + side_name(side) + " products " + std::to_string(begin) +
                ".." + std::to_string(end) + " failed: " + (ok ? "" : error.message) + " reply " +
                to_json(&reply);
    bson_destroy(&reply);
  }
  out.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const double r1 = process_cpu_seconds(cfg_.remold_pid), b1 = process_cpu_seconds(cfg_.backend_pid);
  for (bson_t* d : docs) bson_destroy(d);
  if (!failure.empty()) throw std::runtime_error(failure);
  if (r0 >= 0 && r1 >= 0) out.cpu_remold = r1 - r0;
  if (b0 >= 0 && b1 >= 0) out.cpu_backend = b1 - b0;
  return out;
}

// Counts on both sides and the stored shape of the ruled collection: if the
// rule is not active, the bench would compare flat against flat.
void Bench::check_storage(int64_t products) {
  auto count_of = [&](mongoc_client_t* c, const char* db) {
    auto reply = command(c, db, json(R"({"count": "products"})").get());
    return static_cast<int64_t>(number_at(reply.get(), "n").value_or(-1));
  };
  const int64_t flat = count_of(admin_.get(), kFlatDb);
  const int64_t stored = count_of(admin_.get(), kAttrDb);
  const int64_t logical = count_of(client_[kRemold].get(), kAttrDb);
  if (flat != products || stored != products || logical != products)
    throw std::runtime_error("after loading " + std::to_string(products) +
                             " products: flat has " + std::to_string(flat) +
                             ", the ruled collection on the backend " + std::to_string(stored) +
                             ", count through remold " + std::to_string(logical));
  // Product 0 as stored on the backend: must carry specs, not attributes.
  auto cmd = json(R"({"find": "products", "filter": {"_id": 0}, "limit": 1, "singleBatch": true})");
  auto reply = command(admin_.get(), kAttrDb, cmd.get());
  bson_iter_t it, doc;
  bson_t stored_doc;
  bool has_specs = false, has_attribute = false;
  std::string stored_json = "?";
  if (bson_iter_init(&it, reply.get()) && bson_iter_find_descendant(&it, "cursor.firstBatch.0", &doc) &&
      BSON_ITER_HOLDS_DOCUMENT(&doc)) {
    uint32_t len;
    const uint8_t* data;
    bson_iter_document(&doc, &len, &data);
    if (bson_init_static(&stored_doc, data, len)) {
      stored_json = to_json(&stored_doc);
      has_specs = bson_has_field(&stored_doc, "specs");
      for (const auto& [k, v] : products_[0].attrs) has_attribute = has_attribute || bson_has_field(&stored_doc, k.c_str());
    }
  }
  if (!has_specs || has_attribute)
    throw std::runtime_error("bench_attr.products is not stored by the attribute rule (product 0 "
                             "on the backend: " + stored_json + "); is remold running with the rule "
                             "shown above in its --rules directory?");
  if (products == cfg_.sizes.front()) std::printf("  product 0 as stored on the backend: %s\n", stored_json.c_str());
  auto indexes = command(admin_.get(), kAttrDb, json(R"({"listIndexes": "products"})").get(), true);
  const std::string text = to_json(indexes.get());
  if (text.find("\"specs.k\" : 1, \"specs.v\" : 1") == std::string::npos)
    std::printf("  WARNING: bench_attr.products has no {specs.k: 1, specs.v: 1} index on the backend: "
                "%s\n", text.c_str());
}

QueryOutcome Bench::query(int side, const bson_t* filter, bool verify) {
  QueryOutcome out;
  CollectionPtr coll(mongoc_client_get_collection(client_[side].get(),
                                                  side == kFlat ? kFlatDb : kAttrDb, kColl));
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
  out.ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  if (!out.ok) out.error = error.message;
  return out;
}

// Walks the winning plan: "FETCH<IXSCAN" (outermost first).
std::string plan_stages(const bson_t* explain) {
  bson_iter_t it, plan;
  if (!bson_iter_init(&it, explain) || !bson_iter_find_descendant(&it, "queryPlanner.winningPlan", &plan) ||
      !BSON_ITER_HOLDS_DOCUMENT(&plan))
    return "?";
  std::string out;
  for (int depth = 0; depth < 16; ++depth) {
    uint32_t len;
    const uint8_t* data;
    bson_iter_document(&plan, &len, &data);
    bson_t node;
    if (!bson_init_static(&node, data, len)) break;
    bson_iter_t child;
    // mongod 7+ with the slot-based engine nests the plan under queryPlan.
    if (bson_iter_init_find(&child, &node, "queryPlan") && BSON_ITER_HOLDS_DOCUMENT(&child)) {
      plan = child;
      continue;
    }
    if (bson_iter_init_find(&child, &node, "stage") && BSON_ITER_HOLDS_UTF8(&child)) {
      if (!out.empty()) out += "<";
      out += bson_iter_utf8(&child, nullptr);
    }
    if (bson_iter_init_find(&child, &node, "inputStage") && BSON_ITER_HOLDS_DOCUMENT(&child)) {
      plan = child;
      continue;
    }
    bson_iter_t stages, first;
    if (bson_iter_init_find(&stages, &node, "inputStages") && BSON_ITER_HOLDS_ARRAY(&stages) &&
        bson_iter_recurse(&stages, &first) && bson_iter_next(&first) && BSON_ITER_HOLDS_DOCUMENT(&first)) {
      plan = first;
      continue;
    }
    break;
  }
  return out.empty() ? "?" : out;
}

ExplainOutcome Bench::explain(int side, const bson_t* filter) {
  ExplainOutcome out;
  bson_t cmd, inner;
  bson_init(&cmd);
  BSON_APPEND_DOCUMENT_BEGIN(&cmd, "explain", &inner);
  BSON_APPEND_UTF8(&inner, "find", kColl);
  BSON_APPEND_DOCUMENT(&inner, "filter", filter);
  bson_append_document_end(&cmd, &inner);
  BSON_APPEND_UTF8(&cmd, "verbosity", "executionStats");
  CommandResult r = run_command(client_[side].get(), side == kRemold ? kAttrDb : kFlatDb, &cmd);
  bson_destroy(&cmd);
  if (!r.ok) {
    const std::string message = r.error.message;
    // CommandNotFound (59): the backend has no explain at all
    // (mongo-java-server). Anything else is a real failure, shown as is.
    if (r.error.code == 59 || message.find("no such command") != std::string::npos) {
      out.kind = ExplainOutcome::kUnsupported;
    } else {
      out.kind = ExplainOutcome::kFailed;
      out.error = message;
    }
    return out;
  }
  out.kind = ExplainOutcome::kStats;
  out.docs_examined = number_at(r.reply.get(), "executionStats.totalDocsExamined").value_or(-1);
  out.keys_examined = number_at(r.reply.get(), "executionStats.totalKeysExamined").value_or(-1);
  out.returned = number_at(r.reply.get(), "executionStats.nReturned").value_or(-1);
  out.plan = plan_stages(r.reply.get());
  if (out.docs_examined < 0) {
    out.kind = ExplainOutcome::kFailed;
    out.error = "no executionStats.totalDocsExamined in " + to_json(r.reply.get()).substr(0, 300);
  }
  return out;
}

Row Bench::run_cell(int64_t products, const Shape& shape) {
  Row row;
  row.products = products;
  row.shape = &shape;
  for (int64_t i = 0; i < products; ++i) row.expected += shape.matches(products_[i]) ? 1 : 0;
  BsonPtr filters[kSides] = {json(shape.filter), json(shape.filter), json(shape.stored_filter)};
  std::vector<int> sides{kRemold, kFlat};
  if (cfg_.stored) sides.push_back(kStored);

  auto note_error = [&](int side, const QueryOutcome& q) {
    if (q.ok) return;
    if (row.errors++ == 0) row.first_error = std::string(side_name(side)) + ": " + q.error;
  };
  // Warm-up, then one verification query per side.
  for (int w = 0; w < cfg_.warmup; ++w)
    for (int side : sides) note_error(side, query(side, filters[side].get(), false));
  QueryOutcome verify[kSides];
  for (int side : sides) {
    verify[side] = query(side, filters[side].get(), true);
    note_error(side, verify[side]);
    row.returned[side] = verify[side].ok ? verify[side].returned : -1;
  }
  if (!cfg_.stored) row.returned[kStored] = row.expected;  // not run: not checked
  row.content_equal = verify[kRemold].ok && verify[kFlat].ok &&
                      verify[kRemold].returned == verify[kFlat].returned &&
                      verify[kRemold].digest == verify[kFlat].digest;
  std::ostringstream msg;
  if (!row.counts_ok()) {
    msg << "returned remold " << row.returned[kRemold] << ", flat " << row.returned[kFlat];
    if (cfg_.stored) msg << ", stored (direct $elemMatch) " << row.returned[kStored];
    msg << ", expected " << row.expected << "; ";
  }
  if (!row.content_equal && verify[kRemold].ok && verify[kFlat].ok)
    msg << "documents differ (first remold " << verify[kRemold].first_doc << ", first flat "
        << verify[kFlat].first_doc << "); ";
  row.verify_message = msg.str();

  // Timed rounds: one query per side, the order cycling through every
  // permutation (R F S, F S R, S R F, R S F, ...) so each side runs first,
  // second and last equally often.
  std::vector<std::vector<int>> orders;
  {
    std::vector<int> perm = sides;
    std::sort(perm.begin(), perm.end());
    do orders.push_back(perm);
    while (std::next_permutation(perm.begin(), perm.end()));
    // Interleave so consecutive rounds differ in their first side.
    std::stable_sort(orders.begin(), orders.end(), [](const auto& a, const auto& b) {
      return a[1] < b[1];
    });
  }
  double cpu_r[kSides] = {0, 0, 0}, cpu_b[kSides] = {0, 0, 0};
  bool cpu_known_r = cfg_.remold_pid > 0, cpu_known_b = cfg_.backend_pid > 0;
  const auto cell_start = Clock::now();
  for (int round = 0; round < cfg_.max_rounds; ++round) {
    const double elapsed = std::chrono::duration<double>(Clock::now() - cell_start).count();
    if (round >= cfg_.min_rounds && elapsed >= cfg_.seconds) break;
    if (round >= 3 && elapsed >= cfg_.max_cell_seconds) break;  // a slow cell
    for (int side : orders[round % orders.size()]) {
      const double r0 = process_cpu_seconds(cfg_.remold_pid);
      const double b0 = process_cpu_seconds(cfg_.backend_pid);
      QueryOutcome q = query(side, filters[side].get(), false);
      const double r1 = process_cpu_seconds(cfg_.remold_pid);
      const double b1 = process_cpu_seconds(cfg_.backend_pid);
      if (r0 < 0 || r1 < 0) cpu_known_r = false;
      if (b0 < 0 || b1 < 0) cpu_known_b = false;
      cpu_r[side] += r1 - r0;
      cpu_b[side] += b1 - b0;
      note_error(side, q);
      if (q.ok && q.returned != row.expected && row.errors++ == 0)
        row.first_error = std::string(side_name(side)) + ": a timed query returned " +
                          std::to_string(q.returned) + ", expected " + std::to_string(row.expected);
      if (q.ok) row.ms[side].push_back(q.ms);
    }
  }
  for (int side : sides) {
    const double n = static_cast<double>(std::max<size_t>(1, row.ms[side].size()));
    if (cpu_known_r) row.cpu_remold_ms[side] = cpu_r[side] * 1000 / n;
    if (cpu_known_b) row.cpu_backend_ms[side] = cpu_b[side] * 1000 / n;
  }
  for (int side : {kRemold, kFlat}) row.explain[side] = explain(side, filters[side].get());
  row.load = load_average();
  return row;
}

std::string explain_text(const ExplainOutcome& e) {
  char buf[64];
  switch (e.kind) {
    case ExplainOutcome::kStats:
      std::snprintf(buf, sizeof buf, "%.0f", e.docs_examined);
      return buf;
    case ExplainOutcome::kUnsupported: return "n/a";
    case ExplainOutcome::kFailed: return "error";
    default: return "?";
  }
}

std::string ms_pair(const std::vector<double>& v) {
  if (v.empty()) return "-";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.2f/%.2f", percentile(v, 0.5), percentile(v, 0.99));
  return buf;
}

std::string ratio_text(double num, double den) {
  if (!(num > 0) || !(den > 0)) return "-";
  char buf[24];
  std::snprintf(buf, sizeof buf, "%.2fx", num / den);
  return buf;
}

void print_table_header() {
  std::printf("\n%9s %-12s %8s %5s %17s %15s %19s %17s %9s %9s %7s %13s %4s %s\n", "products",
              "shape", "returned", "sel%", "remold p50/p99 ms", "flat p50/p99 ms",
              "remold/flat p50 p99", "stored p50/p99 ms", "stor/flat", "rem/stor", "rm cpu",
              "docs exam R/F", "n", "check");
}

void Bench::print_row(const Row& r) {
  const double rp50 = percentile(r.ms[kRemold], 0.5), rp99 = percentile(r.ms[kRemold], 0.99);
  const double fp50 = percentile(r.ms[kFlat], 0.5), fp99 = percentile(r.ms[kFlat], 0.99);
  const double sp50 = percentile(r.ms[kStored], 0.5);
  std::string examined;
  if (r.explain[kRemold].kind == ExplainOutcome::kUnsupported &&
      r.explain[kFlat].kind == ExplainOutcome::kUnsupported)
    examined = "n/a";
  else
    examined = explain_text(r.explain[kRemold]) + "/" + explain_text(r.explain[kFlat]);
  std::string check;
  if (r.ok()) {
    check = "counts equal, content equal";
  } else {
    check = "FAILED: " + r.verify_message;
    if (r.errors) check += std::to_string(r.errors) + " failed queries, first: " + r.first_error;
  }
  char cpu[16] = "?";
  if (r.cpu_remold_ms[kRemold] >= 0) std::snprintf(cpu, sizeof cpu, "%.2f", r.cpu_remold_ms[kRemold]);
  const std::string ratios = ratio_text(rp50, fp50) + " " + ratio_text(rp99, fp99);
  std::printf("%9lld %-12s %8lld %5.2f %17s %15s %19s %17s %9s %9s %7s %13s %4zu %s\n",
              static_cast<long long>(r.products), r.shape->name.c_str(),
              static_cast<long long>(r.returned[kRemold]),
              100.0 * static_cast<double>(r.expected) / static_cast<double>(r.products),
              ms_pair(r.ms[kRemold]).c_str(), ms_pair(r.ms[kFlat]).c_str(), ratios.c_str(),
              ms_pair(r.ms[kStored]).c_str(), ratio_text(sp50, fp50).c_str(),
              ratio_text(rp50, sp50).c_str(), cpu, examined.c_str(), r.ms[kRemold].size(),
              check.c_str());
  std::fflush(stdout);
}

void Bench::print_json(const Row& r) {
  auto explain_json = [](const ExplainOutcome& e) {
    std::ostringstream j;
    switch (e.kind) {
      case ExplainOutcome::kStats:
        j << "{\"docs_examined\":" << e.docs_examined << ",\"keys_examined\":" << e.keys_examined
          << ",\"n_returned\":" << e.returned << ",\"plan\":\"" << json_escape(e.plan) << "\"}";
        break;
      case ExplainOutcome::kUnsupported: j << "\"n/a (backend has no explain)\""; break;
      case ExplainOutcome::kFailed: j << "{\"error\":\"" << json_escape(e.error) << "\"}"; break;
      default: j << "null";
    }
    return j.str();
  };
  auto num_or_null = [](double v) {
    if (!(v >= 0)) return std::string("null");
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4g", v);
    return std::string(buf);
  };
  auto ratio_or_null = [&](double a, double b) { return b > 0 && a > 0 ? num_or_null(a / b) : "null"; };
  double p50[kSides], p99[kSides];
  for (int side = 0; side < kSides; ++side) {
    p50[side] = r.ms[side].empty() ? -1 : percentile(r.ms[side], 0.5);
    p99[side] = r.ms[side].empty() ? -1 : percentile(r.ms[side], 0.99);
  }
  std::ostringstream j;
  j << "BENCH_JSON {\"bench\":\"attribute_query\",\"products\":" << r.products << ",\"shape\":\""
    << r.shape->name << "\",\"filter\":" << r.shape->filter
    << ",\"stored_filter\":" << r.shape->stored_filter << ",\"expected\":" << r.expected
    << ",\"returned_remold\":" << r.returned[kRemold] << ",\"returned_flat\":" << r.returned[kFlat];
  if (cfg_.stored) j << ",\"returned_stored\":" << r.returned[kStored];
  j << ",\"counts_equal\":" << (r.counts_ok() ? "true" : "false")
    << ",\"content_equal\":" << (r.content_equal ? "true" : "false")
    << ",\"samples\":" << r.ms[kRemold].size() << ",\"remold_p50_ms\":" << num_or_null(p50[kRemold])
    << ",\"remold_p99_ms\":" << num_or_null(p99[kRemold])
    << ",\"flat_p50_ms\":" << num_or_null(p50[kFlat]) << ",\"flat_p99_ms\":" << num_or_null(p99[kFlat])
    << ",\"ratio_p50\":" << ratio_or_null(p50[kRemold], p50[kFlat])
    << ",\"ratio_p99\":" << ratio_or_null(p99[kRemold], p99[kFlat])
    << ",\"stored_p50_ms\":" << num_or_null(p50[kStored])
    << ",\"stored_p99_ms\":" << num_or_null(p99[kStored])
    << ",\"stored_vs_flat_p50\":" << ratio_or_null(p50[kStored], p50[kFlat])
    << ",\"remold_vs_stored_p50\":" << ratio_or_null(p50[kRemold], p50[kStored])
    << ",\"docs_examined\":{\"remold\":" << explain_json(r.explain[kRemold])
    << ",\"flat\":" << explain_json(r.explain[kFlat]) << "}"
    << ",\"cpu_ms_per_query\":{";
  for (int side = 0; side < kSides; ++side) {
    if (side == kStored && !cfg_.stored) continue;
    j << (side ? "," : "") << "\"" << side_name(side) << "\":{\"remold\":"
      << num_or_null(r.cpu_remold_ms[side]) << ",\"backend\":" << num_or_null(r.cpu_backend_ms[side])
      << "}";
  }
  j << "},\"errors\":" << r.errors << ",\"ok\":" << (r.ok() ? "true" : "false")
    << ",\"load1\":" << r.load << ",\"cores\":" << usable_cores() << "}";
  std::printf("%s\n", j.str().c_str());
}

int Bench::run() {
  client_[kRemold] = connect(cfg_.proxy, "attribute_bench");
  client_[kFlat] = connect(cfg_.direct, "attribute_bench");
  client_[kStored] = connect(cfg_.direct, "attribute_bench");
  admin_ = connect(cfg_.direct, "attribute_bench");
  print_header();

  std::vector<const Shape*> shapes;
  for (const Shape& s : all_shapes())
    if (cfg_.shapes.empty() || std::find(cfg_.shapes.begin(), cfg_.shapes.end(), s.name) != cfg_.shapes.end())
      shapes.push_back(&s);

  const int64_t largest = cfg_.sizes.back();
  products_.reserve(largest);
  for (int64_t i = 0; i < largest; ++i) products_.push_back(make_product(i));

  // How sparse the attributes are, over the largest load.
  {
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
      if (cfg_.stored && s->stored_filter != s->filter)
        std::printf("      %s\n", s->stored_filter.c_str());
    }
    std::printf("\n");
  }

  reset();
  std::vector<Row> rows;
  std::vector<std::string> load_lines;  // BENCH_JSON of the loads, printed after the rows'
  int64_t loaded = 0;
  for (int64_t size : cfg_.sizes) {
    const LoadOutcome load[2] = {load_side(kRemold, loaded, size), load_side(kFlat, loaded, size)};
    auto cpu = [](double v) {
      if (v < 0) return std::string("?");
      char buf[16];
      std::snprintf(buf, sizeof buf, "%.2f", v);
      return std::string(buf);
    };
    const double n = static_cast<double>(size - loaded);
    std::printf("loaded products %lld..%lld (insertMany of %d, unordered):\n"
                "  through remold %.2f s (%.0f/s; CPU s remold %s, backend %s), flat directly "
                "%.2f s (%.0f/s; CPU s backend %s)\n",
                static_cast<long long>(loaded), static_cast<long long>(size - 1), cfg_.batch,
                load[0].seconds, n / load[0].seconds, cpu(load[0].cpu_remold).c_str(),
                cpu(load[0].cpu_backend).c_str(), load[1].seconds, n / load[1].seconds,
                cpu(load[1].cpu_backend).c_str());
    char load_json[640];
    std::snprintf(load_json, sizeof load_json, "BENCH_JSON {\"bench\":\"attribute_load\",\"from\":%lld,\"to\":%lld,"
                "\"remold_seconds\":%.4f,\"flat_seconds\":%.4f,\"remold_per_s\":%.1f,"
                "\"flat_per_s\":%.1f,\"remold_side_cpu_s\":{\"remold\":%s,\"backend\":%s},"
                "\"flat_side_cpu_s\":{\"remold\":%s,\"backend\":%s},\"load1\":%.2f}",
                static_cast<long long>(loaded), static_cast<long long>(size), load[0].seconds,
                load[1].seconds, n / load[0].seconds, n / load[1].seconds,
                load[0].cpu_remold < 0 ? "null" : cpu(load[0].cpu_remold).c_str(),
                load[0].cpu_backend < 0 ? "null" : cpu(load[0].cpu_backend).c_str(),
                load[1].cpu_remold < 0 ? "null" : cpu(load[1].cpu_remold).c_str(),
                load[1].cpu_backend < 0 ? "null" : cpu(load[1].cpu_backend).c_str(), load_average());
    load_lines.push_back(load_json);
    loaded = size;
    check_storage(size);
    if (size == cfg_.sizes.front() && cfg_.initial_warmup > 0) {
      const auto start = Clock::now();
      int64_t queries = 0;
      while (std::chrono::duration<double>(Clock::now() - start).count() < cfg_.initial_warmup) {
        for (const Shape* shape : shapes) {
          auto filter = json(shape->filter);
          auto stored_filter = json(shape->stored_filter);
          for (int side : {kRemold, kFlat, kStored}) {
            if (side == kStored && !cfg_.stored) continue;
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
    std::fflush(stdout);
    for (const Shape* shape : shapes) {
      rows.push_back(run_cell(size, *shape));
      const Row& r = rows.back();
      char stored[48] = "";
      if (cfg_.stored) std::snprintf(stored, sizeof stored, ", stored %.2f ms", percentile(r.ms[kStored], 0.5));
      std::printf("  %lld %s: %zu rounds, p50 remold %.2f ms, flat %.2f ms%s%s%s\n",
                  static_cast<long long>(size), shape->name.c_str(), r.ms[kRemold].size(),
                  percentile(r.ms[kRemold], 0.5), percentile(r.ms[kFlat], 0.5), stored,
                  r.ok() ? "" : "; FAILED: ", r.ok() ? "" : (r.verify_message + r.first_error).c_str());
      std::fflush(stdout);
    }
  }

  print_table_header();
  for (const Row& r : rows) print_row(r);

  bool all_ok = true;
  for (const Row& r : rows) all_ok = all_ok && r.ok();
  bool no_explain = true;
  for (const Row& r : rows)
    no_explain = no_explain && r.explain[kRemold].kind == ExplainOutcome::kUnsupported &&
                 r.explain[kFlat].kind == ExplainOutcome::kUnsupported;
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
  if (no_explain) std::printf("  docs examined: n/a (backend has no explain)\n");
  for (const Row& r : rows) {
    for (int side : {kRemold, kFlat}) {
      const ExplainOutcome& e = r.explain[side];
      if (e.kind == ExplainOutcome::kStats)
        std::printf("  explain %lld %s %s: docs %.0f, keys %.0f, returned %.0f, plan %s\n",
                    static_cast<long long>(r.products), r.shape->name.c_str(), side_name(side),
                    e.docs_examined, e.keys_examined, e.returned, e.plan.c_str());
      else if (e.kind == ExplainOutcome::kFailed)
        std::printf("  explain %lld %s %s failed: %s\n", static_cast<long long>(r.products),
                    r.shape->name.c_str(), side_name(side), e.error.c_str());
    }
  }
  std::printf("\n");
  for (const Row& r : rows) print_json(r);
  for (const auto& line : load_lines) std::printf("%s\n", line.c_str());

  if (!cfg_.keep) reset();
  std::printf("\nload average after the run: %.2f\n", load_average());
  if (!all_ok) std::printf("some rows failed their checks (see the check column)\n");
  std::fflush(stdout);
  return all_ok ? 0 : 1;
}

}  // namespace
}  // namespace attribute_bench

int main(int argc, char** argv) {
  const auto cfg = attribute_bench::parse_args(argc, argv);
  return bench_common::run_main("attribute_bench", [&] { return attribute_bench::Bench(cfg).run(); });
}
