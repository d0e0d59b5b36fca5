// subset_bench: what remold's subset rule saves and costs, against the
// application doing the same work itself directly on the backend, with the
// same client code in the same run. The scaffolding (flags, header,
// connections, CPU, threads, rounds, the insert and read tables) is
// pattern_harness's.
//
//   (a) read, "the product page": one findOne of the product, which embeds
//       its 10 most recent reviews (through remold, and directly), against
//       the application's own way without the pattern: findOne of the
//       product, then find(reviews {productId}).sort({at: -1}).limit(10),
//       both directly, with a {productId: 1, at: -1} index on the reviews;
//       at 100 and at 10,000 reviews per product.
//   (b) insert: one review inserted through remold, which pushes its entry
//       onto the product's recentReviews, against the application's two
//       writes sent directly: insert the review, then the same guarded
//       $push ({$each: [entry], $sort: {at: -1, _id: -1}, $slice: 10}).
//       Closed loop, 1 and 8 client threads.
//
// Contract:
//   - The remold side is bench_subset.{reviews,products}; the direct side is
//     bench_subset_direct.{reviews,products}. Both are seeded directly on the
//     backend (never through remold): reviews with insertMany, products with
//     the recentReviews the bench computes from the reviews it generated
//     (the direct side's read products without it: the application without
//     the pattern has no such array). Collections are emptied with direct
//     deletes before every case.
//   - Checks, on the backend directly: after every insert case (both sides)
//     and before every read cell is timed, the number of reviews, and every
//     product's recentReviews equals its first 10 reviews in the order
//     {at: -1, _id: -1} as the backend sorts them, projected to {_id, author,
//     rating, at} (byte for byte). Every read cell's sides are checked before
//     timing against the reviews the bench generated, and every timed read
//     checks the product was found with 10 reviews (or all, if fewer).
//   - Prints two tables and one "BENCH_JSON {...}" line per row; run() is
//     true when every operation succeeded and every check passed.
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
#include <cstdio>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace subset_bench {
namespace {

using namespace bench_common;

constexpr const char* kRuledDb = "bench_subset";
constexpr const char* kDirectDb = "bench_subset_direct";
constexpr const char* kArray = "recentReviews";
constexpr size_t kLimit = 10;                   // the rule's limit
constexpr int64_t kT0Ms = 1704067200000;        // 2024-01-01T00:00:00Z
constexpr int64_t kAtStepMs = 3600 * 1000;      // `at` is a whole hour ...
constexpr int64_t kAtSteps = 30 * 24;           // ... within 30 days: ties are common

const char kRule[] =
    "namespace: bench_subset.reviews\n"
    "pattern: subset\n"
    "subset:\n"
    "  parent: products                 # same database\n"
    "  link: productId                  # review.productId == product._id\n"
    "  array: recentReviews             # the product's embedded array\n"
    "  sort: {at: -1}                   # the first N in this order; ties by _id in the direction of the last key\n"
    "  limit: 10\n"
    "  fields: [author, rating, at]     # copied into each entry after the review's _id\n";

struct Options {
  bool run_read = true;
  bool run_insert = true;
  std::vector<int64_t> read_sizes{100, 10000};  // reviews per product in the read cells
  std::vector<int64_t> read_products{5, 2};     // products per read cell (one per size, or one)
  ReadSchedule reads;  // per read cell: read_rounds.h's defaults
  int batch = 1000;      // reviews per insertMany while seeding
  WriteSchedule inserts;  // the insert cases: write_rounds.h's defaults
  int64_t products = 1000;     // products the inserted reviews pick from
  int64_t initial_reviews = 10;  // per product, seeded before every insert case

  int64_t products_for(size_t cell) const {
    return read_products.size() == 1 ? read_products[0] : read_products[cell];
  }
};

// The usage lines of the options (the schedules' with their defaults).
const std::string kOptions =
    "  --only read|insert   run one part (default both)\n"
    "  --read-sizes 100,10000 reviews per product in the read cells (default 100,10000)\n"
    "  --read-products 5,2  products per read cell, one per size (or one for every\n"
    "                       size; default 5,2)\n" +
    read_schedule_usage(Options{}.reads) +
    "  --batch N            reviews per insertMany while seeding (default 1000)\n" +
    write_schedule_usage(Options{}.inserts) +
    "  --products N         products the inserted reviews pick from (default 1000)\n"
    "  --initial-reviews N  reviews per product seeded before every insert case, so the\n"
    "                       arrays start full (default 10; 0: products start without one)\n";


// ---- documents ---------------------------------------------------------------

// A review as the application writes it, and what the bench needs of it.
struct Review {
  bson_oid_t id;
  int64_t product = 0;
  int64_t at_ms = 0;
  int author = 0;
  int rating = 0;
  int text_len = 0;
};

Review random_review(std::mt19937_64& rng, int64_t product) {
  Review r;
  bson_oid_init(&r.id, nullptr);  // thread-safe: the default context
  r.product = product;
  r.at_ms = kT0Ms + static_cast<int64_t>(rng() % static_cast<uint64_t>(kAtSteps)) * kAtStepMs;
  r.author = static_cast<int>(rng() % 50);
  r.rating = 1 + static_cast<int>(rng() % 5);
  r.text_len = 100 + static_cast<int>(rng() % 400);
  return r;
}

void author_name(int author, char (&name)[24]) { std::snprintf(name, sizeof name, "author-%02d", author); }

// {_id, productId, author, rating, at, text}
bson_t* review_bson(const Review& r) {
  static const std::string kText(500, 'r');
  bson_t* doc = bson_new();
  BSON_APPEND_OID(doc, "_id", &r.id);
  BSON_APPEND_INT64(doc, "productId", r.product);
  char name[24];
  author_name(r.author, name);
  BSON_APPEND_UTF8(doc, "author", name);
  BSON_APPEND_INT32(doc, "rating", r.rating);
  BSON_APPEND_DATE_TIME(doc, "at", r.at_ms);
  bson_append_utf8(doc, "text", 4, kText.data(), std::min<int>(r.text_len, static_cast<int>(kText.size())));
  return doc;
}

// The entry remold embeds: {_id, then the copied fields in the review's order}.
void append_entry(bson_t* entry, const Review& r) {
  BSON_APPEND_OID(entry, "_id", &r.id);
  char name[24];
  author_name(r.author, name);
  BSON_APPEND_UTF8(entry, "author", name);
  BSON_APPEND_INT32(entry, "rating", r.rating);
  BSON_APPEND_DATE_TIME(entry, "at", r.at_ms);
}

BsonPtr entry_bson(const Review& r) {
  BsonPtr entry(bson_new());
  append_entry(entry.get(), r);
  return entry;
}

// The subset's order: at descending, ties by _id descending.
bool comes_first(const Review* a, const Review* b) {
  if (a->at_ms != b->at_ms) return a->at_ms > b->at_ms;
  return bson_oid_compare(&a->id, &b->id) > 0;
}

// Per product 0..products-1, its first kLimit reviews in the subset's order.
std::vector<std::vector<const Review*>> first_reviews(const std::vector<Review>& reviews, int64_t products) {
  std::vector<std::vector<const Review*>> by(static_cast<size_t>(products));
  for (const Review& r : reviews) by[static_cast<size_t>(r.product)].push_back(&r);
  for (auto& v : by) {
    const size_t n = std::min(kLimit, v.size());
    std::partial_sort(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n), v.end(), comes_first);
    v.resize(n);
  }
  return by;
}

// {_id, name, price, description[, recentReviews: [entries]]}
bson_t* product_bson(int64_t id, const std::vector<const Review*>* recent) {
  static const std::string kDescription(300, 'd');
  bson_t* doc = bson_new();
  BSON_APPEND_INT64(doc, "_id", id);
  char name[32];
  std::snprintf(name, sizeof name, "product %lld", static_cast<long long>(id));
  BSON_APPEND_UTF8(doc, "name", name);
  BSON_APPEND_DOUBLE(doc, "price", 9.99 + static_cast<double>(id % 100));
  BSON_APPEND_UTF8(doc, "description", kDescription.c_str());
  if (recent) {
    bson_t array;
    bson_append_array_begin(doc, kArray, -1, &array);
    for (size_t i = 0; i < recent->size(); ++i) {
      const std::string key = std::to_string(i);
      bson_t entry;
      bson_append_document_begin(&array, key.c_str(), -1, &entry);
      append_entry(&entry, *(*recent)[i]);
      bson_append_document_end(&array, &entry);
    }
    bson_append_array_end(doc, &array);
  }
  return doc;
}

// The documents of the array at `key` (copied when `out` is given) and how
// many there are: 0 when the field is missing, std::nullopt when it is not
// an array of documents.
std::optional<size_t> array_documents(const bson_t* doc, const char* key, std::vector<BsonPtr>* out) {
  bson_iter_t it, child;
  if (!bson_iter_init_find(&it, doc, key)) return 0;
  if (!BSON_ITER_HOLDS_ARRAY(&it) || !bson_iter_recurse(&it, &child)) return std::nullopt;
  size_t n = 0;
  while (bson_iter_next(&child)) {
    if (!BSON_ITER_HOLDS_DOCUMENT(&child)) return std::nullopt;
    ++n;
    if (out) {
      uint32_t len = 0;
      const uint8_t* data = nullptr;
      bson_iter_document(&child, &len, &data);
      out->emplace_back(bson_new_from_data(data, len));
    }
  }
  return n;
}


// ---- sides and results -----------------------------------------------------------

const char* side_db(WriteSide s) { return s == WriteSide::remold ? kRuledDb : kDirectDb; }

// An insert case's tally (write_rounds.h): reviews inserted (done; direct:
// and pushed onto their product), latency per review (remold: its insert;
// direct: insert + update).
const WriteTable kInsertTable{
    .json_name = "subset_insert",
    .title = "(b) review insert with its product's recent reviews: remold (one insert, remold pushes\n"
             "    the entry) vs direct (the application inserts, then pushes onto the product itself)\n",
    .unit = "review",
    .units = "reviews",
    .check_legend =
        "  check: reviews stored = seeded + inserts acknowledged, and every product's recentReviews =\n"
        "  its first 10 reviews by {at: -1, _id: -1} as the backend sorts them, projected to\n"
        "  {_id, author, rating, at}, on the backend directly.\n",
};

// Read sides (read_rounds.h): the product with its embedded reviews through
// remold, the same directly, and the application's two reads without the
// pattern.
enum SubsetReadSide { kPageRemold = kReadRemold, kPageDirect = kReadDirect, kPageApp = kReadApp };
const char* read_side_name(int s) {
  return s == kPageRemold ? "findOne via remold" : s == kPageDirect ? "findOne direct" : "findOne + find direct";
}

// The read table (read_rounds.h): a row per reviews/product.
const ReadTable kReadTable{
    .json_name = "subset_read",
    .title = "(a) the product page: findOne of the product embedding its recent reviews (via remold,\n"
             "    direct) vs the application's findOne + find(reviews).sort({at: -1}).limit(10) (direct)\n",
    .key_columns = {{"reviews/product", 15}, {"products", 8}, {"seed s", 7}},
    .side_headers = {"findOne remold ms", "findOne direct ms", "findOne+find ms"},
    .side_keys = {"find_one_remold", "find_one_direct", "app_find_one_and_find"},
    .progress_names = {"findOne remold", "direct", "findOne + find"},
    .ratio_columns = {{{"app/page p50 p99", 17}, ReadRatio::app_over_remold, true},
                      {{"app/direct p50", 13}, ReadRatio::app_over_direct, false},
                      {{"page R/D p50", 15}, ReadRatio::remold_over_direct, false}},
    .backend_cpu = {"be cpu us P/A", 18},
    .ratio_fields = {{"app_vs_page_remold_p50", ReadRatio::app_over_remold, false},
                     {"app_vs_page_remold_p99", ReadRatio::app_over_remold, true},
                     {"app_vs_page_direct_p50", ReadRatio::app_over_direct, false},
                     {"page_remold_vs_direct_p50", ReadRatio::remold_over_direct, false}},
    .legend =
        "  p50/p99 ms = latency of one product page (with n <= 100 reads, p99 is the slowest one);\n"
        "  findOne+find = the application's two reads together. app/page = the application's\n"
        "  percentile / the remold findOne's (what the embedded subset saves a reader);\n"
        "  app/direct = the same against the direct findOne; page R/D = findOne through remold /\n"
        "  findOne direct (the hop: products have no rule, remold forwards them as they are).\n"
        "  seed s = seeding both sides directly (reviews with insertMany, then the products).\n"
        "  be cpu us P/A = backend CPU microseconds per direct findOne / per application page (? = pid\n"
        "  not given). check: every product's recentReviews against its first 10 reviews as the\n"
        "  backend sorts them, every side's answer for every product against the generated reviews,\n"
        "  and the number of reviews of every timed read.\n",
};

struct PageRead {
  bool ok = false;
  bool found = false;    // the product
  int64_t reviews = -1;  // entries of recentReviews (findOne) or reviews returned (app); -1: malformed
  std::vector<BsonPtr> docs;  // copies of them, when asked for
  double ms = 0;
  std::string error;
};

class SubsetScenario : public PatternScenario {
 public:
  const char* program() const override { return "subset_bench"; }
  const char* rule() const override { return kRule; }
  const char* options() const override { return kOptions.c_str(); }
  bool set_option(const std::string& flag, const std::string& value) override;
  void check_options() override;
  void describe() const override;
  bool run(Harness& h) override;
  void clean_up(Harness& h) override;

 private:
  bool run_reads(Harness& h);
  bool run_inserts(Harness& h);
  double seed(Harness& h, const char* db, const std::vector<Review>& reviews, int64_t products,
              bool with_subset);
  std::string verify_products(Harness& h, const char* db, int64_t expected_reviews, int64_t expected_products);
  WriteCase run_insert(Harness& h, WriteSide side, int clients, int round, double seconds);
  ReadCell run_read(Harness& h, int64_t per_product, int64_t products);
  PageRead read(int side, int64_t product, bool keep);

  Options opt_;
  std::vector<ClientPtr> read_client_;  // by ReadSide
};

bool SubsetScenario::set_option(const std::string& flag, const std::string& value) {
  auto int_arg = [&](int lo, int hi) { return static_cast<int>(parse_int(flag, value, lo, hi)); };
  if (flag == "--only") {
    if (value == "insert") opt_.run_read = false;
    else if (value == "read") opt_.run_insert = false;
    else usage_error("--only expects read or insert, got '" + value + "'");
  } else if (flag == "--read-sizes") opt_.read_sizes = parse_int_list(flag, value, 1, 10'000'000);
  else if (flag == "--read-products") opt_.read_products = parse_int_list(flag, value, 1, 100'000);
  else if (flag == "--batch") opt_.batch = int_arg(1, 100000);
  else if (flag == "--products") opt_.products = parse_int(flag, value, 1, 10'000'000);
  else if (flag == "--initial-reviews") opt_.initial_reviews = parse_int(flag, value, 0, 10'000);
  else if (!set_read_option(opt_.reads, flag, value) && !set_write_option(opt_.inserts, flag, value))
    return false;
  return true;
}

void SubsetScenario::check_options() {
  check_read_schedule(opt_.reads);
  if (opt_.read_products.size() != 1 && opt_.read_products.size() != opt_.read_sizes.size())
    usage_error("--read-products takes one count, or one per --read-sizes entry (" +
                std::to_string(opt_.read_sizes.size()) + ")");
}

void SubsetScenario::describe() const {
  std::printf("  remold: bench_subset.reviews written through remold, which maintains\n"
              "    bench_subset.products.recentReviews; direct: bench_subset_direct, written by the bench\n"
              "  data seeded directly on the backend: reviews {_id: ObjectId, productId, author, rating,\n"
              "    at: a whole hour within 30 days (ties common), text: 100-500 bytes} with a\n"
              "    {productId: 1, at: -1} index, and products {_id, name, price, description: 300 bytes,\n"
              "    recentReviews: their first 10 reviews by {at: -1, _id: -1}, computed by the bench}\n");
  if (opt_.run_read) {
    std::string cells;
    for (size_t i = 0; i < opt_.read_sizes.size(); ++i)
      cells += (cells.empty() ? "" : ", ") + std::to_string(opt_.read_sizes[i]) + " reviews x " +
               std::to_string(opt_.products_for(i)) + " products";
    std::printf(
        "  (a) read \"the product page\" (cells: %s): findOne({_id}) of the product\n"
        "      embedding its 10 recent reviews, through remold and directly, against the application\n"
        "      without the pattern, directly on bench_subset_direct (its products have no array):\n"
        "      findOne({_id}) of the product, then find({productId}).sort({at: -1}).limit(10) of\n"
        "      the reviews; %d untimed reads per side, then rounds of one read per side (a random\n"
        "      product, the order rotating) for at least %.3g s and %d rounds\n",
        cells.c_str(), opt_.reads.warmup, opt_.reads.limits.seconds, opt_.reads.limits.min_rounds);
  }
  if (opt_.run_insert) {
    const std::string clients = clients_text(opt_.inserts.clients);
    std::printf(
        "  (b) insert: a review of a random product of %lld (each seeded with %lld reviews first):\n"
        "      remold = insert_one into bench_subset.reviews through remold (remold pushes the entry);\n"
        "      direct = the application's two writes on bench_subset_direct: insert_one of the\n"
        "      review, then update_one({_id: productId, \"recentReviews._id\": {$ne: reviewId}},\n"
        "      {$push: {recentReviews: {$each: [entry], $sort: {at: -1, _id: -1}, $slice: 10}}});\n"
        "      latency per review (both writes for direct)\n"
        "      %.3g s untimed per side, then %d rounds x clients %s x (remold, direct) of %.3g s,\n"
        "      in ABBA order; every case verified on the backend afterwards\n",
        static_cast<long long>(opt_.products), static_cast<long long>(opt_.initial_reviews), opt_.inserts.warmup,
        opt_.inserts.rounds, clients.c_str(), opt_.inserts.seconds);
  }
}

// Empties one database's reviews and products (direct deletes), then seeds
// `reviews` and products 0..products-1 directly, each with its first
// reviews when `with_subset`. Returns the seconds it took.
double SubsetScenario::seed(Harness& h, const char* db, const std::vector<Review>& reviews, int64_t products,
                            bool with_subset) {
  mongoc_client_t* direct = h.admin(Via::direct);
  const auto start = Clock::now();
  for (const char* coll : {"reviews", "products"}) delete_all(direct, db, coll);
  // The index the application's product page reads by (and remold's refill, if any).
  command(direct, db,
          json(R"({"createIndexes": "reviews",
                   "indexes": [{"key": {"productId": 1, "at": -1}, "name": "productId_1_at_-1"}]})").get());
  {
    Documents docs;
    docs.reserve(reviews.size());
    for (const Review& r : reviews) docs.add(review_bson(r));
    CollectionPtr coll = collection(direct, db, "reviews");
    load_in_batches(coll.get(), docs, opt_.batch, h.cpu(), std::string("reviews on ") + db);
  }
  const auto recent = first_reviews(reviews, products);
  CollectionPtr coll = collection(direct, db, "products");
  for (int64_t begin = 0; begin < products; begin += 1000) {
    Documents docs;
    for (int64_t p = begin; p < std::min<int64_t>(products, begin + 1000); ++p)
      docs.add(product_bson(p, with_subset ? &recent[static_cast<size_t>(p)] : nullptr));
    const InsertResult inserted = insert_many(coll.get(), docs.data(), docs.size(), nullptr);
    if (!inserted.ok) throw std::runtime_error(std::string("inserting products on ") + db + ": " + inserted.error);
  }
  return seconds_since(start);
}

// Every product's recentReviews against its reviews, on the backend
// directly: the first kLimit in {at: -1, _id: -1} order as the backend
// sorts them, projected to {_id, author, rating, at}, byte for byte.
// Returns "" when all agree, else what differs (first few).
std::string SubsetScenario::verify_products(Harness& h, const char* db, int64_t expected_reviews,
                                            int64_t expected_products) {
  std::ostringstream msg;
  CollectionPtr reviews = collection(h.admin(Via::direct), db, "reviews");
  CollectionPtr products = collection(h.admin(Via::direct), db, "products");
  bson_error_t error;
  const int64_t n = mongoc_collection_count_documents(reviews.get(), json("{}").get(), nullptr, nullptr,
                                                      nullptr, &error);
  if (n < 0) return std::string("counting reviews failed: ") + error.message;
  if (n != expected_reviews) msg << n << " reviews stored, " << expected_reviews << " seeded and inserted; ";

  // The projection lists the fields in the review's order, so the entry is
  // the same bytes whichever order the backend projects in.
  std::map<int64_t, std::vector<BsonPtr>> truth;
  BsonPtr opts(BCON_NEW("sort", "{", "productId", BCON_INT32(1), "at", BCON_INT32(-1), "_id", BCON_INT32(-1), "}",
                        "projection", "{", "productId", BCON_INT32(1), "author", BCON_INT32(1), "rating",
                        BCON_INT32(1), "at", BCON_INT32(1), "}"));
  mongoc_cursor_t* cursor = mongoc_collection_find_with_opts(reviews.get(), json("{}").get(), opts.get(), nullptr);
  const bson_t* doc;
  int64_t unlinked = 0;
  while (mongoc_cursor_next(cursor, &doc)) {
    const auto product = int_at(doc, "productId");
    if (!product) {
      ++unlinked;
      continue;
    }
    std::vector<BsonPtr>& first = truth[*product];
    if (first.size() < kLimit) {
      bson_t* entry = bson_new();
      bson_copy_to_excluding_noinit(doc, entry, "productId", nullptr);
      first.emplace_back(entry);
    }
  }
  if (mongoc_cursor_error(cursor, &error)) {
    mongoc_cursor_destroy(cursor);
    return msg.str() + "reading the reviews failed: " + error.message;
  }
  mongoc_cursor_destroy(cursor);
  if (unlinked) msg << unlinked << " reviews without an integer productId; ";

  int bad = 0;
  int64_t seen = 0;
  // Sorted on the server: an unsorted cursor of several batches may return
  // a product updated meanwhile twice on DocumentDB (docs/backends.md, 8).
  BsonPtr projection(BCON_NEW("projection", "{", kArray, BCON_INT32(1), "}", "sort", "{", "_id", BCON_INT32(1), "}"));
  cursor = mongoc_collection_find_with_opts(products.get(), json("{}").get(), projection.get(), nullptr);
  while (mongoc_cursor_next(cursor, &doc)) {
    ++seen;
    const int64_t id = int_at(doc, "_id").value_or(-1);
    std::vector<BsonPtr> expected;
    if (const auto it = truth.find(id); it != truth.end()) {
      expected = std::move(it->second);
      truth.erase(it);  // what is left has no product
    }
    std::vector<BsonPtr> held;
    const std::optional<size_t> count = array_documents(doc, kArray, &held);
    std::ostringstream why;
    if (!count) {
      why << kArray << " is not an array of documents: " << to_json(doc);
    } else {
      for (size_t i = 0; i < std::max(held.size(), expected.size()); ++i) {
        const bson_t* h_i = i < held.size() ? held[i].get() : nullptr;
        const bson_t* e_i = i < expected.size() ? expected[i].get() : nullptr;
        if (same(h_i, e_i)) continue;
        why << kArray << "[" << i << "] is " << json_or_none(h_i) << ", expected " << json_or_none(e_i)
            << " (holds " << held.size() << " entries, expected " << expected.size() << ")";
        break;
      }
    }
    const std::string wrong = why.str();
    if (!wrong.empty() && bad++ < 3) msg << "product " << id << ": " << wrong << "; ";
  }
  if (mongoc_cursor_error(cursor, &error)) msg << "reading products failed: " << error.message << "; ";
  mongoc_cursor_destroy(cursor);
  if (bad) msg << bad << " of " << seen << " products wrong; ";
  if (seen != expected_products) msg << seen << " products stored, " << expected_products << " seeded; ";
  if (!truth.empty()) msg << "reviews of " << truth.size() << " products that do not exist; ";
  return msg.str();
}

// One closed-loop insert case of `seconds` on a freshly seeded side, verified.
WriteCase SubsetScenario::run_insert(Harness& h, WriteSide side, int clients, int round, double seconds) {
  const char* db = side_db(side);
  {
    std::mt19937_64 rng(static_cast<uint64_t>(round + 2) * 7919u + static_cast<uint64_t>(side));
    std::vector<Review> initial;
    initial.reserve(static_cast<size_t>(opt_.products * opt_.initial_reviews));
    for (int64_t j = 0; j < opt_.initial_reviews; ++j)
      for (int64_t p = 0; p < opt_.products; ++p) initial.push_back(random_review(rng, p));
    seed(h, db, initial, opt_.products, true);
  }
  WriteCase result(static_cast<int>(side), clients, round);
  auto prepare = [&](mongoc_client_t* client, int thread) -> Operation {
    SharedCollection reviews = shared_collection(client, db, "reviews");
    SharedCollection products = shared_collection(client, db, "products");
    std::mt19937_64 rng(thread_seed(round, static_cast<int>(side), clients, thread));
    return [this, side, reviews, products, rng](Tally& tally) mutable {
      const int64_t product = static_cast<int64_t>(rng() % static_cast<uint64_t>(opt_.products));
      const Review review = random_review(rng, product);
      BsonPtr doc(review_bson(review));
      BsonPtr selector, update;
      if (side == WriteSide::direct) {
        // What remold sends after the insert, sent by the application.
        selector.reset(BCON_NEW("_id", BCON_INT64(product), "recentReviews._id", "{", "$ne",
                                BCON_OID(&review.id), "}"));
        BsonPtr entry = entry_bson(review);
        update.reset(BCON_NEW("$push", "{", kArray, "{", "$each", "[", BCON_DOCUMENT(entry.get()), "]", "$sort",
                              "{", "at", BCON_INT32(-1), "_id", BCON_INT32(-1), "}", "$slice",
                              BCON_INT32(static_cast<int32_t>(kLimit)), "}", "}"));
      }
      bson_error_t error;
      const auto start = Clock::now();
      bool ok = mongoc_collection_insert_one(reviews.get(), doc.get(), nullptr, nullptr, &error);
      if (ok && side == WriteSide::direct)
        ok = update_one_matching(products.get(), selector.get(), update.get(), "push onto product", product,
                                 &error);
      tally.record(ok, ms_since(start), error.message);
      return true;
    };
  };
  const Via via = side == WriteSide::remold ? Via::remold : Via::direct;
  result.run = run_client_threads(h.connect(via, clients), h.cpu(), seconds, prepare);
  result.verify_message =
      verify_products(h, db, opt_.products * opt_.initial_reviews + result.ops(), opt_.products);
  return result;
}

PageRead SubsetScenario::read(int side, int64_t product, bool keep) {
  static const BsonPtr find_one_opts = json(R"({"limit": 1, "singleBatch": true})");
  static const BsonPtr recent_opts(
      BCON_NEW("sort", "{", "at", BCON_INT32(-1), "}", "limit", BCON_INT64(static_cast<int64_t>(kLimit))));
  PageRead out;
  bson_error_t error;
  mongoc_client_t* client = read_client_[side].get();
  BsonPtr by_id(BCON_NEW("_id", BCON_INT64(product)));
  const auto start = Clock::now();
  CollectionPtr products = collection(client, side == kPageApp ? kDirectDb : kRuledDb, "products");
  mongoc_cursor_t* cursor = mongoc_collection_find_with_opts(products.get(), by_id.get(), find_one_opts.get(), nullptr);
  const bson_t* doc;
  if (mongoc_cursor_next(cursor, &doc)) {
    out.found = true;
    if (side != kPageApp) {
      const std::optional<size_t> n = array_documents(doc, kArray, keep ? &out.docs : nullptr);
      out.reviews = n ? static_cast<int64_t>(*n) : -1;
    }
  }
  out.ok = !mongoc_cursor_error(cursor, &error);
  mongoc_cursor_destroy(cursor);
  if (out.ok && side == kPageApp) {
    CollectionPtr reviews = collection(client, kDirectDb, "reviews");
    BsonPtr by_product(BCON_NEW("productId", BCON_INT64(product)));
    cursor = mongoc_collection_find_with_opts(reviews.get(), by_product.get(), recent_opts.get(), nullptr);
    out.reviews = 0;
    while (mongoc_cursor_next(cursor, &doc)) {
      ++out.reviews;
      if (keep) out.docs.emplace_back(bson_copy(doc));
    }
    out.ok = !mongoc_cursor_error(cursor, &error);
    mongoc_cursor_destroy(cursor);
  }
  out.ms = ms_since(start);
  if (!out.ok) out.error = error.message;
  return out;
}

ReadCell SubsetScenario::run_read(Harness& h, int64_t per_product, int64_t products) {
  ReadCell row;
  row.label = "  read cell " + std::to_string(per_product) + " reviews/product";

  // The reviews of every product, interleaved product by product; the same
  // reviews on both sides.
  std::mt19937_64 rng(static_cast<uint64_t>(per_product) * 7919u + static_cast<uint64_t>(products));
  std::vector<Review> reviews;
  reviews.reserve(static_cast<size_t>(per_product * products));
  for (int64_t j = 0; j < per_product; ++j)
    for (int64_t p = 0; p < products; ++p) reviews.push_back(random_review(rng, p));
  const auto recent = first_reviews(reviews, products);
  const double ruled_s = seed(h, kRuledDb, reviews, products, true);
  const double direct_s = seed(h, kDirectDb, reviews, products, false);
  row.key_text = {std::to_string(per_product), std::to_string(products), fixed_or_unknown(ruled_s + direct_s, 2)};
  row.key_json = {{"reviews_per_product", std::to_string(per_product)},
                  {"products", std::to_string(products)},
                  {"seed_seconds", number_or_null(ruled_s + direct_s)}};
  std::printf("  read cell %lld reviews/product: seeded %zu reviews and %lld products directly on each side "
              "in %.2f s (remold side, with recentReviews) + %.2f s (direct side)\n",
              static_cast<long long>(per_product), reviews.size(), static_cast<long long>(products), ruled_s,
              direct_s);
  std::fflush(stdout);

  // Verification: the seeded subsets against the backend's order, and every
  // side's answer for every product against the generated reviews.
  std::ostringstream msg;
  msg << verify_products(h, kRuledDb, static_cast<int64_t>(reviews.size()), products);
  auto note = [&](int side, const PageRead& r) {
    if (!r.ok) row.failures.add(std::string(read_side_name(side)) + ": " + r.error);
  };
  const int64_t expected_n = std::min<int64_t>(per_product, static_cast<int64_t>(kLimit));
  for (int64_t p = 0; p < products; ++p) {
    const std::vector<const Review*>& first = recent[static_cast<size_t>(p)];
    for (int side = 0; side < kReadSides; ++side) {
      PageRead r = read(side, p, true);
      note(side, r);
      if (!r.ok) continue;
      std::string wrong;
      if (!r.found) wrong = "product not found";
      else if (r.reviews != expected_n)
        wrong = std::to_string(r.reviews) + " reviews, expected " + std::to_string(expected_n);
      for (size_t i = 0; wrong.empty() && i < first.size(); ++i) {
        const bson_t* got = r.docs[i].get();
        if (side == kPageApp) {
          // Ties in `at` may come in either order here (the sort has no _id).
          if (int_at(got, "productId") != p || date_at(got, "at") != first[i]->at_ms)
            wrong = "review " + std::to_string(i) + " is " + to_json(got) + ", expected at " +
                    std::to_string(first[i]->at_ms);
        } else if (BsonPtr want = entry_bson(*first[i]); !same(got, want.get())) {
          wrong = "entry " + std::to_string(i) + " is " + to_json(got) + ", expected " + to_json(want.get());
        }
      }
      if (!wrong.empty()) msg << read_side_name(side) << " of product " << p << ": " << wrong << "; ";
    }
  }
  row.verify_message = msg.str();

  // Timed rounds: one read per side of one random product.
  int64_t product = 0;
  auto pick_product = [&] { product = static_cast<int64_t>(rng() % static_cast<uint64_t>(products)); };
  auto timed_read = [&](int side) -> std::optional<double> {
    PageRead r = read(side, product, false);
    note(side, r);
    if (r.ok && (!r.found || r.reviews != expected_n))
      row.failures.add(std::string(read_side_name(side)) + ": a timed read of product " + std::to_string(product) +
                       (r.found ? " returned " + std::to_string(r.reviews) + " reviews" : " found no product") +
                       ", expected " + std::to_string(expected_n));
    if (!r.ok) return std::nullopt;
    return r.ms;
  };
  auto warm = [&](int side, int w) { note(side, read(side, w % products, false)); };
  time_read_cell(row, opt_.reads, h.cpu(), warm, pick_product, timed_read);
  return row;
}

// ---- the run ---------------------------------------------------------------------

bool SubsetScenario::run_reads(Harness& h) {
  read_client_ = connect_read_sides(h);
  return run_read_cells(opt_.read_sizes.size(), kReadTable, [&](size_t cell) {
    return run_read(h, opt_.read_sizes[cell], opt_.products_for(cell));
  });
}

bool SubsetScenario::run_inserts(Harness& h) {
  std::printf("\n");
  return run_write_rounds(opt_.inserts, kInsertTable, [&](WriteSide side, int clients, int round, double seconds) {
    return run_insert(h, side, clients, round, seconds);
  });
}

bool SubsetScenario::run(Harness& h) {
  const bool reads_ok = !opt_.run_read || run_reads(h);
  const bool inserts_ok = !opt_.run_insert || run_inserts(h);
  return reads_ok && inserts_ok;
}

// Dropped directly: the subset rule ensures nothing remold would have to
// forget, and remold refuses a drop of reviews that still exist.
void SubsetScenario::clean_up(Harness& h) {
  for (const char* db : {kRuledDb, kDirectDb})
    command(h.admin(Via::direct), db, json(R"({"dropDatabase": 1})").get(), true);
}

}  // namespace
}  // namespace subset_bench

int main(int argc, char** argv) {
  subset_bench::SubsetScenario scenario;
  return bench_common::run_pattern_bench(argc, argv, scenario);
}
