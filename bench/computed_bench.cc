// computed_bench: what remold's computed rule costs and saves, against the
// application doing the same work itself directly on the backend, with the
// same client code (mongo-c-driver) in the same run.
//
//   (a) insert: one comment inserted through remold, which maintains its
//       post (commentCount: count, lastCommentAt: {max: createdAt}), against
//       the application's two writes sent directly: insert the comment, then
//       update its post {$inc: {commentCount: 1}, $max: {lastCommentAt}}.
//       Closed loop, 1 and 8 client threads.
//   (b) read: "the post with its comment count": one findOne of the post's
//       maintained fields (through remold, and directly) against the
//       aggregate over its comments ($match postId, $group count + max)
//       directly, at 100 and at 10,000 comments per post.
//
// Contract:
//   - remold (--proxy) must run with the computed rule printed in the header
//     (bench_computed.comments -> bench_computed.posts). bench/computed_run.sh
//     writes that rule and starts remold with it.
//   - The remold side is bench_computed.{comments,posts}; the direct side is
//     bench_computed_direct.{comments,posts}. Both are emptied with direct
//     deletes (never dropped: remold may keep what it ensured on them) and
//     their posts re-inserted directly before every case.
//   - Every insert case is verified afterwards on the backend directly: the
//     number of comments equals the inserts that succeeded, and every post's
//     commentCount and lastCommentAt equal the count and the greatest
//     createdAt of its comments (a $group over the comments). Every read
//     cell is verified before it is timed (each side returns the count and
//     the greatest createdAt the bench generated), and every timed read
//     checks the count it returns.
//   - Prints two tables and one "BENCH_JSON {...}" line per row. Exit
//     status: 0 when every operation succeeded and every check passed, 1
//     otherwise, 2 on bad arguments.
#include "bench_common.h"
#include "bench_mongoc.h"

#include <bson/bson.h>
#include <mongoc/mongoc.h>

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
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace computed_bench {
namespace {

using namespace bench_common;

using Clock = std::chrono::steady_clock;

constexpr const char* kRuledDb = "bench_computed";
constexpr const char* kDirectDb = "bench_computed_direct";
constexpr int64_t kT0Ms = 1704067200000;                // 2024-01-01T00:00:00Z
constexpr int64_t kSpreadMs = 30LL * 24 * 3600 * 1000;  // createdAt within 30 days

const char kRuleText[] =
    "namespace: bench_computed.comments\n"
    "pattern: computed\n"
    "computed:\n"
    "  aggregates:\n"
    "    - target: posts\n"
    "      link: {from: postId, to: _id}\n"
    "      fields:\n"
    "        commentCount: count\n"
    "        lastCommentAt: {max: createdAt}\n";

struct Config {
  std::string direct;
  std::string proxy;
  bool run_insert = true;
  bool run_read = true;
  std::vector<int> clients{1, 8};
  double seconds = 3;      // timed seconds per insert case and round
  int rounds = 3;          // insert rounds (remold and direct back to back, order swapped)
  double warmup = 2;       // untimed seconds of inserts per side before the first round
  int64_t posts = 1000;    // posts the inserted comments pick from
  std::vector<int64_t> read_sizes{100, 10000};  // comments per post in the read cells
  int64_t read_posts = 5;  // posts per read cell
  double read_seconds = 3;     // timed seconds per read cell, at least
  int min_reads = 100;         // timed rounds (one read per side) per read cell, at least
  int max_reads = 5000;        // and at most
  double max_read_seconds = 20;  // a cell of slow reads stops here (after 10 rounds)
  int read_warmup = 20;        // untimed reads per side per cell
  int batch = 1000;            // comments per insertMany while loading a read cell
  bool keep = false;
  int remold_pid = 0;
  int backend_pid = 0;
};

const char kUsage[] =
    "usage: computed_bench --direct HOST:PORT --proxy HOST:PORT [options]\n"
    "  --direct HOST:PORT     the backend (the application's own writes, the aggregate,\n"
    "                         and every verification)\n"
    "  --proxy HOST:PORT      remold, running the computed rule for bench_computed.comments\n"
    "  --only insert|read     run one part (default both)\n"
    "  --clients 1,8          client threads of the insert cases (default 1,8)\n"
    "  --seconds S            timed seconds per insert case and round (default 3)\n"
    "  --rounds N             insert rounds; remold and direct run back to back, the order\n"
    "                         swapped every round; the table shows the median (default 3)\n"
    "  --warmup S             untimed seconds of inserts per side first (default 2)\n"
    "  --posts N              posts the inserted comments pick from (default 1000)\n"
    "  --read-sizes 100,10000 comments per post in the read cells (default 100,10000)\n"
    "  --read-posts N         posts per read cell (default 5)\n"
    "  --read-seconds S       timed seconds per read cell, at least (default 3)\n"
    "  --min-reads N          timed rounds (one read per side) per read cell, at least\n"
    "                         (default 100)\n"
    "  --max-reads N          and at most (default 5000)\n"
    "  --max-read-seconds S   stop a cell of slow reads after S seconds, once it has 10\n"
    "                         rounds (default 20)\n"
    "  --read-warmup N        untimed reads per side per cell (default 20)\n"
    "  --batch N              comments per insertMany while loading a read cell (default 1000)\n"
    "  --keep                 leave the collections in place at the end\n"
    "  --remold-pid PID       report remold's CPU time per operation (local runs)\n"
    "  --backend-pid PID      report the backend's CPU time per operation (local runs)\n";

std::vector<int> parse_int_list(const std::string& flag, const std::string& value) {
  std::vector<int> out;
  for (const auto& s : split_list(value)) out.push_back(static_cast<int>(parse_int(flag, s, 1, 256)));
  if (out.empty()) usage_error(flag + " is empty");
  return out;
}

Config parse_args(int argc, char** argv) {
  set_usage("computed_bench", kUsage);
  Config cfg;
  parse_flags(argc, argv, {"--keep"}, [&](const std::string& flag, const std::string& value) {
    if (flag == "--keep") cfg.keep = true;
    else if (flag == "--direct") check_endpoint(flag, cfg.direct = value);
    else if (flag == "--proxy") check_endpoint(flag, cfg.proxy = value);
    else if (flag == "--only") {
      if (value == "insert") cfg.run_read = false;
      else if (value == "read") cfg.run_insert = false;
      else usage_error("--only expects insert or read, got '" + value + "'");
    } else if (flag == "--clients") cfg.clients = parse_int_list(flag, value);
    else if (flag == "--seconds") cfg.seconds = parse_number(flag, value);
    else if (flag == "--rounds") cfg.rounds = static_cast<int>(parse_int(flag, value, 1, 1000));
    else if (flag == "--warmup") cfg.warmup = parse_number(flag, value, true);
    else if (flag == "--posts") cfg.posts = parse_int(flag, value, 1, 10'000'000);
    else if (flag == "--read-sizes") {
      cfg.read_sizes.clear();
      for (const auto& s : split_list(value)) cfg.read_sizes.push_back(parse_int(flag, s, 1, 10'000'000));
      if (cfg.read_sizes.empty()) usage_error("--read-sizes is empty");
    } else if (flag == "--read-posts") cfg.read_posts = parse_int(flag, value, 1, 100'000);
    else if (flag == "--read-seconds") cfg.read_seconds = parse_number(flag, value, true);
    else if (flag == "--min-reads") cfg.min_reads = static_cast<int>(parse_int(flag, value, 1, 10'000'000));
    else if (flag == "--max-reads") cfg.max_reads = static_cast<int>(parse_int(flag, value, 1, 10'000'000));
    else if (flag == "--max-read-seconds") cfg.max_read_seconds = parse_number(flag, value);
    else if (flag == "--read-warmup") cfg.read_warmup = static_cast<int>(parse_int(flag, value, 0, 100000));
    else if (flag == "--batch") cfg.batch = static_cast<int>(parse_int(flag, value, 1, 100000));
    else if (flag == "--remold-pid") cfg.remold_pid = static_cast<int>(parse_int(flag, value, 1, 1 << 30));
    else if (flag == "--backend-pid") cfg.backend_pid = static_cast<int>(parse_int(flag, value, 1, 1 << 30));
    else usage_error("unknown argument '" + flag + "'");
  });
  if (cfg.direct.empty() || cfg.proxy.empty()) usage_error("--direct and --proxy are required");
  if (cfg.max_reads < cfg.min_reads) usage_error("--max-reads is below --min-reads");
  return cfg;
}

// ---- small helpers -----------------------------------------------------------

std::string num_or_null(double v, const char* fmt = "%.4g") {
  if (!(v >= 0) || !std::isfinite(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

std::string ratio_text(double num, double den) {
  if (!(num > 0) || !(den > 0)) return "-";
  char buf[24];
  std::snprintf(buf, sizeof buf, "%.2fx", num / den);
  return buf;
}

std::string ms_pair(const std::vector<double>& v) {
  if (v.empty()) return "-";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.2f/%.2f", percentile(v, 0.5), percentile(v, 0.99));
  return buf;
}

std::string cpu_text(double v) {
  if (!(v >= 0)) return "?";
  char buf[24];
  std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}


// The int64 / date at a top-level key, when present with that type.
std::optional<int64_t> int_at(const bson_t* doc, const char* key) {
  bson_iter_t it;
  if (!bson_iter_init_find(&it, doc, key)) return std::nullopt;
  if (BSON_ITER_HOLDS_INT32(&it) || BSON_ITER_HOLDS_INT64(&it)) return bson_iter_as_int64(&it);
  return std::nullopt;
}

std::optional<int64_t> date_at(const bson_t* doc, const char* key) {
  bson_iter_t it;
  if (!bson_iter_init_find(&it, doc, key) || !BSON_ITER_HOLDS_DATE_TIME(&it)) return std::nullopt;
  return bson_iter_date_time(&it);
}

bool has_key(const bson_t* doc, const char* key) {
  bson_iter_t it;
  return bson_iter_init_find(&it, doc, key);
}

// A comment as the application writes it.
bson_t* comment_bson(int64_t post, int64_t created_ms, int author, int text_len) {
  static const std::string kText(200, 'c');
  bson_t* doc = bson_new();
  bson_oid_t oid;
  bson_oid_init(&oid, nullptr);
  BSON_APPEND_OID(doc, "_id", &oid);
  BSON_APPEND_INT64(doc, "postId", post);
  BSON_APPEND_DATE_TIME(doc, "createdAt", created_ms);
  char name[24];
  std::snprintf(name, sizeof name, "author-%02d", author);
  BSON_APPEND_UTF8(doc, "author", name);
  bson_append_utf8(doc, "text", 4, kText.data(), std::min<int>(text_len, static_cast<int>(kText.size())));
  return doc;
}

// ---- the bench -----------------------------------------------------------------

enum Side { kRemold = 0, kDirect = 1 };
const char* side_name(int s) { return s == kRemold ? "remold" : "direct"; }

struct InsertCase {
  int side = kRemold;
  int clients = 1;
  int round = 0;
  int64_t ops = 0;       // comments inserted (and, direct, their post updated)
  int64_t errors = 0;
  std::string first_error;
  double seconds = 0;
  std::vector<double> ms;  // per comment: remold's insert; direct: insert + update
  double cpu_remold = -1, cpu_backend = -1;  // CPU seconds during the timed part
  std::string verify_message;  // empty: verified
  double load = 0;
  double rate() const { return seconds > 0 ? static_cast<double>(ops) / seconds : 0; }
  bool ok() const { return errors == 0 && verify_message.empty(); }
};

// Read sides: the maintained post through remold, the same post directly,
// and the aggregate over the comments directly.
enum ReadSide { kFindRemold = 0, kFindDirect = 1, kAggregate = 2 };
constexpr int kReadSides = 3;
const char* read_side_name(int s) {
  return s == kFindRemold ? "findOne via remold" : s == kFindDirect ? "findOne direct" : "aggregate direct";
}

struct ReadRow {
  int64_t per_post = 0;
  int64_t posts = 0;
  double load_seconds = 0;       // loading the comments through remold
  double load_cpu_remold = -1, load_cpu_backend = -1;
  std::vector<double> ms[kReadSides];
  double cpu_remold_us[kReadSides] = {-1, -1, -1};
  double cpu_backend_us[kReadSides] = {-1, -1, -1};
  int64_t errors = 0;
  std::string first_error;
  std::string verify_message;
  double load = 0;
  bool ok() const { return errors == 0 && verify_message.empty(); }
};

struct ReadOutcome {
  bool ok = false;
  int64_t count = -1;
  std::optional<int64_t> last_ms;
  double ms = 0;
  std::string error;
};

class Bench {
 public:
  explicit Bench(const Config& cfg) : cfg_(cfg) {}
  int run();

 private:
  void print_header();
  void reset(int side, int64_t posts);
  InsertCase run_insert(int side, int clients, int round, double seconds, bool verify);
  std::string verify_posts(const char* db, int64_t expected_comments,
                           std::optional<int64_t> per_post = std::nullopt);
  ReadRow run_read(int64_t per_post);
  ReadOutcome read(int side, int64_t post);
  void print_insert_table(const std::vector<InsertCase>& cases);
  void print_read_table(const std::vector<ReadRow>& rows);

  const Config& cfg_;
  ClientPtr admin_;           // direct: resets, verification
  ClientPtr read_client_[kReadSides];
  std::map<int64_t, int64_t> read_expected_last_;  // post -> greatest createdAt (read cells)
};

void Bench::print_header() {
  std::printf("computed_bench: direct %s (backend), remold %s\n", cfg_.direct.c_str(), cfg_.proxy.c_str());
  std::printf("  remold rule (bench_computed.comments, written through remold):\n");
  std::istringstream rule(kRuleText);
  for (std::string line; std::getline(rule, line);) std::printf("    | %s\n", line.c_str());
  std::printf("  client: mongo-c-driver %s, one connection per client thread, closed loop\n",
              mongoc_get_version());
  if (cfg_.run_insert)
    std::printf(
        "  (a) insert: a comment {_id, postId, createdAt, author, text} of a random post of %lld:\n"
        "      remold = insert_one into bench_computed.comments through remold (remold maintains\n"
        "      the post); direct = the application's two writes on bench_computed_direct:\n"
        "      insert_one of the comment, then update_one of its post {$inc: {commentCount: 1},\n"
        "      $max: {lastCommentAt}}; latency per comment (both writes for direct)\n"
        "      %.3g s untimed per side, then %d rounds x clients %s x (remold, direct) of %.3g s,\n"
        "      the order swapped every round; every case verified on the backend afterwards\n",
        static_cast<long long>(cfg_.posts), cfg_.warmup, cfg_.rounds,
        [&] {
          std::string s;
          for (int c : cfg_.clients) s += (s.empty() ? "" : ",") + std::to_string(c);
          return s;
        }().c_str(),
        cfg_.seconds);
  if (cfg_.run_read)
    std::printf(
        "  (b) read \"a post with its comment count\" (%lld posts per cell, loaded through remold\n"
        "      with insertMany of %d, with a {postId: 1} index on the comments): findOne({_id},\n"
        "      projection {commentCount, lastCommentAt}) of the maintained post through remold\n"
        "      and directly, against aggregate [{$match: {postId}}, {$group: {_id: null,\n"
        "      commentCount: {$sum: 1}, lastCommentAt: {$max: \"$createdAt\"}}}] directly;\n"
        "      %d untimed reads per side, then rounds of one read per side (a random post,\n"
        "      the order rotating) for at least %.3g s and %d rounds\n",
        static_cast<long long>(cfg_.read_posts), cfg_.batch, cfg_.read_warmup, cfg_.read_seconds,
        cfg_.min_reads);
  print_machine("  CAVEAT: the bench client, remold and the backend share these cores (on 2 cores\n"
                "  every cycle remold spends is taken from the backend or the client), and other\n"
                "  load on the machine moves every number: compare rows of the same run only.\n\n");
  std::fflush(stdout);
}

// Empties one side's comments and posts (direct deletes) and inserts posts
// 0..posts-1 directly, with no maintained field.
void Bench::reset(int side, int64_t posts) {
  const char* db = side == kRemold ? kRuledDb : kDirectDb;
  for (const char* coll : {"comments", "posts"}) {
    bson_t cmd, deletes, one, q;
    bson_init(&cmd);
    BSON_APPEND_UTF8(&cmd, "delete", coll);
    BSON_APPEND_ARRAY_BEGIN(&cmd, "deletes", &deletes);
    BSON_APPEND_DOCUMENT_BEGIN(&deletes, "0", &one);
    BSON_APPEND_DOCUMENT_BEGIN(&one, "q", &q);
    bson_append_document_end(&one, &q);
    BSON_APPEND_INT32(&one, "limit", 0);
    bson_append_document_end(&deletes, &one);
    bson_append_array_end(&cmd, &deletes);
    command(admin_.get(), db, &cmd);
    bson_destroy(&cmd);
  }
  CollectionPtr coll(mongoc_client_get_collection(admin_.get(), db, "posts"));
  for (int64_t begin = 0; begin < posts; begin += 1000) {
    const int64_t end = std::min<int64_t>(posts, begin + 1000);
    std::vector<bson_t*> docs;
    for (int64_t p = begin; p < end; ++p) {
      bson_t* d = bson_new();
      BSON_APPEND_INT64(d, "_id", p);
      char title[32];
      std::snprintf(title, sizeof title, "post %lld", static_cast<long long>(p));
      BSON_APPEND_UTF8(d, "title", title);
      docs.push_back(d);
    }
    bson_error_t error;
    const bool ok = mongoc_collection_insert_many(coll.get(), const_cast<const bson_t**>(docs.data()),
                                                  docs.size(), nullptr, nullptr, &error);
    for (bson_t* d : docs) bson_destroy(d);
    if (!ok) throw std::runtime_error(std::string("inserting posts on ") + db + ": " + error.message);
  }
}

// Every post's maintained fields against its comments, on the backend
// directly. Returns "" when all agree, else what differs (first few).
std::string Bench::verify_posts(const char* db, int64_t expected_comments,
                                std::optional<int64_t> per_post) {
  std::ostringstream msg;
  CollectionPtr comments(mongoc_client_get_collection(admin_.get(), db, "comments"));
  CollectionPtr posts(mongoc_client_get_collection(admin_.get(), db, "posts"));
  bson_error_t error;
  const int64_t n = mongoc_collection_count_documents(comments.get(), json("{}").get(), nullptr,
                                                      nullptr, nullptr, &error);
  if (n < 0) return std::string("counting comments failed: ") + error.message;
  if (n != expected_comments)
    msg << n << " comments stored, " << expected_comments << " inserted; ";

  struct Truth {
    int64_t count = 0;
    int64_t last = 0;
  };
  std::map<int64_t, Truth> truth;
  auto pipeline = json(R"({"pipeline": [{"$group": {"_id": "$postId", "n": {"$sum": 1},
                                          "last": {"$max": "$createdAt"}}}]})");
  mongoc_cursor_t* cursor = mongoc_collection_aggregate(comments.get(), MONGOC_QUERY_NONE,
                                                        pipeline.get(), nullptr, nullptr);
  const bson_t* doc;
  while (mongoc_cursor_next(cursor, &doc)) {
    auto id = int_at(doc, "_id");
    if (!id) continue;
    truth[*id] = {int_at(doc, "n").value_or(-1), date_at(doc, "last").value_or(-1)};
  }
  if (mongoc_cursor_error(cursor, &error)) {
    mongoc_cursor_destroy(cursor);
    return std::string("aggregating comments failed: ") + error.message;
  }
  mongoc_cursor_destroy(cursor);

  int bad = 0;
  int64_t sum = 0, seen = 0;
  cursor = mongoc_collection_find_with_opts(posts.get(), json("{}").get(), nullptr, nullptr);
  while (mongoc_cursor_next(cursor, &doc)) {
    ++seen;
    const int64_t id = int_at(doc, "_id").value_or(-1);
    const auto it = truth.find(id);
    const Truth t = it == truth.end() ? Truth{} : it->second;
    const auto count = int_at(doc, "commentCount");
    const auto last = date_at(doc, "lastCommentAt");
    bool good;
    if (t.count == 0)
      good = (!count || *count == 0) && !has_key(doc, "lastCommentAt");
    else
      good = count && *count == t.count && last && *last == t.last;
    if (per_post && t.count != *per_post) good = false;
    if (count) sum += *count;
    if (!good && bad++ < 3)
      msg << "post " << id << " holds " << to_json(doc) << ", its comments: count " << t.count
          << ", greatest createdAt " << t.last << (per_post ? " (generated: " + std::to_string(*per_post) + ")" : "")
          << "; ";
  }
  if (mongoc_cursor_error(cursor, &error)) msg << "reading posts failed: " << error.message << "; ";
  mongoc_cursor_destroy(cursor);
  if (bad) msg << bad << " of " << seen << " posts wrong; ";
  if (sum != n) msg << "commentCount adds up to " << sum << ", " << n << " comments stored; ";
  return msg.str();
}

InsertCase Bench::run_insert(int side, int clients, int round, double seconds, bool verify) {
  reset(side, cfg_.posts);
  InsertCase result;
  result.side = side;
  result.clients = clients;
  result.round = round;
  const char* db = side == kRemold ? kRuledDb : kDirectDb;
  std::vector<ClientPtr> conns;
  for (int t = 0; t < clients; ++t)
    conns.push_back(connect(side == kRemold ? cfg_.proxy : cfg_.direct, "computed_bench"));

  struct ThreadOut {
    std::vector<double> ms;
    int64_t ops = 0, errors = 0;
    std::string first_error;
  };
  std::vector<ThreadOut> outs(clients);
  std::latch ready(clients + 1);
  std::latch go(1);
  Clock::time_point deadline;
  std::vector<std::thread> threads;
  for (int t = 0; t < clients; ++t) {
    threads.emplace_back([&, t] {
      ThreadOut& out = outs[t];
      CollectionPtr comments(mongoc_client_get_collection(conns[t].get(), db, "comments"));
      CollectionPtr posts(mongoc_client_get_collection(conns[t].get(), db, "posts"));
      std::mt19937_64 rng(static_cast<uint64_t>(round) * 1000003u + static_cast<uint64_t>(side) * 1009u +
                          static_cast<uint64_t>(clients) * 31u + static_cast<uint64_t>(t));
      out.ms.reserve(65536);
      ready.count_down();
      go.wait();
      while (Clock::now() < deadline) {
        const int64_t post = static_cast<int64_t>(rng() % static_cast<uint64_t>(cfg_.posts));
        const int64_t created = kT0Ms + static_cast<int64_t>(rng() % static_cast<uint64_t>(kSpreadMs));
        bson_t* doc = comment_bson(post, created, static_cast<int>(rng() % 50),
                                   40 + static_cast<int>(rng() % 120));
        bson_t selector, update, inc, max;
        if (side == kDirect) {
          bson_init(&selector);
          BSON_APPEND_INT64(&selector, "_id", post);
          bson_init(&update);
          BSON_APPEND_DOCUMENT_BEGIN(&update, "$inc", &inc);
          BSON_APPEND_INT32(&inc, "commentCount", 1);
          bson_append_document_end(&update, &inc);
          BSON_APPEND_DOCUMENT_BEGIN(&update, "$max", &max);
          BSON_APPEND_DATE_TIME(&max, "lastCommentAt", created);
          bson_append_document_end(&update, &max);
        }
        bson_error_t error;
        const auto start = Clock::now();
        bool ok = mongoc_collection_insert_one(comments.get(), doc, nullptr, nullptr, &error);
        if (ok && side == kDirect) {
          bson_t reply;
          ok = mongoc_collection_update_one(posts.get(), &selector, &update, nullptr, &reply, &error);
          if (ok && number_at(&reply, "matchedCount").value_or(0) != 1) {
            ok = false;
            std::snprintf(error.message, sizeof error.message, "update of post %lld matched %s",
                          static_cast<long long>(post), to_json(&reply).c_str());
          }
          bson_destroy(&reply);
        }
        const auto end = Clock::now();
        bson_destroy(doc);
        if (side == kDirect) {
          bson_destroy(&selector);
          bson_destroy(&update);
        }
        if (ok) {
          ++out.ops;
          out.ms.push_back(std::chrono::duration<double, std::milli>(end - start).count());
        } else if (out.errors++ == 0) {
          out.first_error = error.message;
        }
      }
    });
  }
  ready.arrive_and_wait();
  const double r0 = process_cpu_seconds(cfg_.remold_pid), b0 = process_cpu_seconds(cfg_.backend_pid);
  const auto start = Clock::now();
  deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  go.count_down();
  for (auto& th : threads) th.join();
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const double r1 = process_cpu_seconds(cfg_.remold_pid), b1 = process_cpu_seconds(cfg_.backend_pid);
  if (r0 >= 0 && r1 >= 0) result.cpu_remold = r1 - r0;
  if (b0 >= 0 && b1 >= 0) result.cpu_backend = b1 - b0;
  result.load = load_average();
  for (auto& out : outs) {
    result.ms.insert(result.ms.end(), out.ms.begin(), out.ms.end());
    result.ops += out.ops;
    result.errors += out.errors;
    if (result.first_error.empty()) result.first_error = out.first_error;
  }
  if (verify) result.verify_message = verify_posts(db, result.ops);
  return result;
}

ReadOutcome Bench::read(int side, int64_t post) {
  ReadOutcome out;
  bson_error_t error;
  mongoc_cursor_t* cursor;
  const auto start = Clock::now();
  if (side == kAggregate) {
    CollectionPtr coll(mongoc_client_get_collection(read_client_[side].get(), kRuledDb, "comments"));
    bson_t pipeline, stages, match, m, group, g, sum, max;
    bson_init(&pipeline);
    BSON_APPEND_ARRAY_BEGIN(&pipeline, "pipeline", &stages);
    BSON_APPEND_DOCUMENT_BEGIN(&stages, "0", &match);
    BSON_APPEND_DOCUMENT_BEGIN(&match, "$match", &m);
    BSON_APPEND_INT64(&m, "postId", post);
    bson_append_document_end(&match, &m);
    bson_append_document_end(&stages, &match);
    BSON_APPEND_DOCUMENT_BEGIN(&stages, "1", &group);
    BSON_APPEND_DOCUMENT_BEGIN(&group, "$group", &g);
    BSON_APPEND_NULL(&g, "_id");
    BSON_APPEND_DOCUMENT_BEGIN(&g, "commentCount", &sum);
    BSON_APPEND_INT32(&sum, "$sum", 1);
    bson_append_document_end(&g, &sum);
    BSON_APPEND_DOCUMENT_BEGIN(&g, "lastCommentAt", &max);
    BSON_APPEND_UTF8(&max, "$max", "$createdAt");
    bson_append_document_end(&g, &max);
    bson_append_document_end(&group, &g);
    bson_append_document_end(&stages, &group);
    bson_append_array_end(&pipeline, &stages);
    cursor = mongoc_collection_aggregate(coll.get(), MONGOC_QUERY_NONE, &pipeline, nullptr, nullptr);
    bson_destroy(&pipeline);
    const bson_t* doc;
    int docs = 0;
    while (mongoc_cursor_next(cursor, &doc)) {
      if (docs++ == 0) {
        out.count = int_at(doc, "commentCount").value_or(-1);
        out.last_ms = date_at(doc, "lastCommentAt");
      }
    }
    if (docs == 0) out.count = 0;
  } else {
    CollectionPtr coll(mongoc_client_get_collection(read_client_[side].get(), kRuledDb, "posts"));
    bson_t filter;
    bson_init(&filter);
    BSON_APPEND_INT64(&filter, "_id", post);
    static const BsonPtr opts =
        json(R"({"projection": {"commentCount": 1, "lastCommentAt": 1}, "limit": 1, "singleBatch": true})");
    cursor = mongoc_collection_find_with_opts(coll.get(), &filter, opts.get(), nullptr);
    bson_destroy(&filter);
    const bson_t* doc;
    if (mongoc_cursor_next(cursor, &doc)) {
      out.count = int_at(doc, "commentCount").value_or(-1);
      out.last_ms = date_at(doc, "lastCommentAt");
    }
  }
  out.ok = !mongoc_cursor_error(cursor, &error);
  mongoc_cursor_destroy(cursor);
  out.ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  if (!out.ok) out.error = error.message;
  return out;
}

ReadRow Bench::run_read(int64_t per_post) {
  ReadRow row;
  row.per_post = per_post;
  row.posts = cfg_.read_posts;
  reset(kRemold, cfg_.read_posts);
  // The index an application running the aggregate would have.
  command(admin_.get(), kRuledDb,
          json(R"({"createIndexes": "comments", "indexes": [{"key": {"postId": 1}, "name": "postId_1"}]})").get(),
          true);

  // Load: the comments of every post, interleaved post by post, through remold.
  std::mt19937_64 rng(static_cast<uint64_t>(per_post) * 7919u);
  read_expected_last_.clear();
  const int64_t total = per_post * cfg_.read_posts;
  std::vector<bson_t*> docs;
  docs.reserve(static_cast<size_t>(total));
  for (int64_t j = 0; j < per_post; ++j) {
    for (int64_t p = 0; p < cfg_.read_posts; ++p) {
      const int64_t created = kT0Ms + static_cast<int64_t>(rng() % static_cast<uint64_t>(kSpreadMs));
      auto [it, fresh] = read_expected_last_.emplace(p, created);
      if (!fresh) it->second = std::max(it->second, created);
      docs.push_back(comment_bson(p, created, static_cast<int>(rng() % 50), 40 + static_cast<int>(rng() % 120)));
    }
  }
  {
    ClientPtr loader = connect(cfg_.proxy, "computed_bench");
    CollectionPtr coll(mongoc_client_get_collection(loader.get(), kRuledDb, "comments"));
    auto opts = json(R"({"ordered": false})");
    const double r0 = process_cpu_seconds(cfg_.remold_pid), b0 = process_cpu_seconds(cfg_.backend_pid);
    const auto start = Clock::now();
    std::string failure;
    for (int64_t begin = 0; begin < total && failure.empty(); begin += cfg_.batch) {
      const int64_t end = std::min<int64_t>(total, begin + cfg_.batch);
      bson_t reply;
      bson_error_t error;
      const bool ok = mongoc_collection_insert_many(coll.get(), const_cast<const bson_t**>(docs.data() + begin),
                                                    static_cast<size_t>(end - begin), opts.get(), &reply, &error);
      const auto n = number_at(&reply, "insertedCount");
      if (!ok || !n || static_cast<int64_t>(*n) != end - begin)
        failure = "loading comments " + std::to_string(begin) + ".." + std::to_string(end) +
                  " through remold failed: " + (ok ? "" : error.message) + " reply " + to_json(&reply);
      bson_destroy(&reply);
    }
    row.load_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    const double r1 = process_cpu_seconds(cfg_.remold_pid), b1 = process_cpu_seconds(cfg_.backend_pid);
    if (r0 >= 0 && r1 >= 0) row.load_cpu_remold = r1 - r0;
    if (b0 >= 0 && b1 >= 0) row.load_cpu_backend = b1 - b0;
    for (bson_t* d : docs) bson_destroy(d);
    if (!failure.empty()) throw std::runtime_error(failure);
  }
  std::printf("  read cell %lld comments/post: loaded %lld comments through remold in %.2f s (%.0f/s)\n",
              static_cast<long long>(per_post), static_cast<long long>(total), row.load_seconds,
              static_cast<double>(total) / row.load_seconds);
  std::fflush(stdout);

  // Verification: the maintained posts, and every side's answer for every post.
  std::ostringstream msg;
  msg << verify_posts(kRuledDb, total, per_post);
  auto note_error = [&](int side, const ReadOutcome& r) {
    if (r.ok) return;
    if (row.errors++ == 0) row.first_error = std::string(read_side_name(side)) + ": " + r.error;
  };
  for (int64_t p = 0; p < cfg_.read_posts; ++p) {
    for (int side = 0; side < kReadSides; ++side) {
      ReadOutcome r = read(side, p);
      note_error(side, r);
      if (r.ok && (r.count != per_post || r.last_ms != read_expected_last_[p]))
        msg << read_side_name(side) << " of post " << p << ": count " << r.count << ", last "
            << (r.last_ms ? std::to_string(*r.last_ms) : "missing") << ", generated " << per_post
            << " and " << read_expected_last_[p] << "; ";
    }
  }
  row.verify_message = msg.str();

  for (int w = 0; w < cfg_.read_warmup; ++w)
    for (int side = 0; side < kReadSides; ++side) note_error(side, read(side, w % cfg_.read_posts));

  // Timed rounds: one read per side of one random post, the order cycling
  // through every permutation.
  std::vector<std::vector<int>> orders;
  {
    std::vector<int> perm{0, 1, 2};
    do orders.push_back(perm);
    while (std::next_permutation(perm.begin(), perm.end()));
  }
  double cpu_r[kReadSides] = {0, 0, 0}, cpu_b[kReadSides] = {0, 0, 0};
  bool known_r = cfg_.remold_pid > 0, known_b = cfg_.backend_pid > 0;
  const auto cell_start = Clock::now();
  for (int round = 0; round < cfg_.max_reads; ++round) {
    const double elapsed = std::chrono::duration<double>(Clock::now() - cell_start).count();
    if (round >= cfg_.min_reads && elapsed >= cfg_.read_seconds) break;
    if (round >= 10 && elapsed >= cfg_.max_read_seconds) break;
    const int64_t post = static_cast<int64_t>(rng() % static_cast<uint64_t>(cfg_.read_posts));
    for (int side : orders[static_cast<size_t>(round) % orders.size()]) {
      const double r0 = process_cpu_seconds(cfg_.remold_pid), b0 = process_cpu_seconds(cfg_.backend_pid);
      ReadOutcome r = read(side, post);
      const double r1 = process_cpu_seconds(cfg_.remold_pid), b1 = process_cpu_seconds(cfg_.backend_pid);
      if (r0 < 0 || r1 < 0) known_r = false;
      if (b0 < 0 || b1 < 0) known_b = false;
      cpu_r[side] += r1 - r0;
      cpu_b[side] += b1 - b0;
      note_error(side, r);
      if (r.ok && r.count != per_post && row.errors++ == 0)
        row.first_error = std::string(read_side_name(side)) + ": a timed read returned count " +
                          std::to_string(r.count) + ", expected " + std::to_string(per_post);
      if (r.ok) row.ms[side].push_back(r.ms);
    }
  }
  for (int side = 0; side < kReadSides; ++side) {
    const double n = static_cast<double>(std::max<size_t>(1, row.ms[side].size()));
    if (known_r) row.cpu_remold_us[side] = cpu_r[side] * 1e6 / n;
    if (known_b) row.cpu_backend_us[side] = cpu_b[side] * 1e6 / n;
  }
  row.load = load_average();
  return row;
}

// ---- tables ----------------------------------------------------------------------

double median_rate(const std::vector<const InsertCase*>& cases) {
  std::vector<double> rates;
  for (const auto* c : cases) rates.push_back(c->rate());
  return median(rates);
}

void Bench::print_insert_table(const std::vector<InsertCase>& cases) {
  std::printf("\n(a) comment insert with its maintained post: remold (one insert, remold maintains the post)\n"
              "    vs direct (the application inserts, then updates the post itself)\n");
  std::printf("%7s %12s %12s %6s %13s %18s %18s %12s %14s %16s %8s %s\n", "clients", "remold op/s",
              "direct op/s", "ratio", "round range", "remold p50/p99 ms", "direct p50/p99 ms",
              "p50 p99 R/D", "rm cpu us/op", "be cpu us/op R/D", "ops R/D", "check");
  std::vector<std::string> json_lines;
  for (int clients : cfg_.clients) {
    std::vector<const InsertCase*> side_cases[2];
    for (const auto& c : cases)
      if (c.clients == clients) side_cases[c.side].push_back(&c);
    if (side_cases[kRemold].empty() || side_cases[kDirect].empty()) continue;
    std::vector<double> ms[2];
    int64_t ops[2] = {0, 0}, errors = 0;
    double seconds[2] = {0, 0}, cpu_r[2] = {0, 0}, cpu_b[2] = {0, 0};
    bool known_r = true, known_b = true;
    std::string check;
    for (int side : {kRemold, kDirect}) {
      for (const auto* c : side_cases[side]) {
        ms[side].insert(ms[side].end(), c->ms.begin(), c->ms.end());
        ops[side] += c->ops;
        seconds[side] += c->seconds;
        errors += c->errors;
        if (c->cpu_remold < 0) known_r = false;
        if (c->cpu_backend < 0) known_b = false;
        cpu_r[side] += c->cpu_remold;
        cpu_b[side] += c->cpu_backend;
        if (!c->ok() && check.empty())
          check = std::string("FAILED ") + side_name(side) + " round " + std::to_string(c->round) + ": " +
                  (c->errors ? std::to_string(c->errors) + " failed inserts, first: " + c->first_error + "; " : "") +
                  c->verify_message;
      }
    }
    if (check.empty()) check = "verified";
    double lo = 1e300, hi = 0;
    const size_t pairs = std::min(side_cases[kRemold].size(), side_cases[kDirect].size());
    for (size_t i = 0; i < pairs; ++i) {
      const double d = side_cases[kDirect][i]->rate();
      if (d <= 0) continue;
      const double r = side_cases[kRemold][i]->rate() / d;
      lo = std::min(lo, r);
      hi = std::max(hi, r);
    }
    const double rate_r = median_rate(side_cases[kRemold]), rate_d = median_rate(side_cases[kDirect]);
    char range[32] = "-";
    if (hi > 0) std::snprintf(range, sizeof range, "%.2f-%.2f", lo, hi);
    auto per_op_us = [&](double cpu, int side) {
      return ops[side] > 0 ? cpu * 1e6 / static_cast<double>(ops[side]) : -1;
    };
    const double rm_us = known_r ? per_op_us(cpu_r[kRemold], kRemold) : -1;
    const double be_r = known_b ? per_op_us(cpu_b[kRemold], kRemold) : -1;
    const double be_d = known_b ? per_op_us(cpu_b[kDirect], kDirect) : -1;
    const double p50[2] = {percentile(ms[0], 0.5), percentile(ms[1], 0.5)};
    const double p99[2] = {percentile(ms[0], 0.99), percentile(ms[1], 0.99)};
    const std::string lat_ratio = ratio_text(p50[0], p50[1]) + " " + ratio_text(p99[0], p99[1]);
    const std::string be = cpu_text(be_r) + "/" + cpu_text(be_d);
    const std::string nops = std::to_string(ops[kRemold]) + "/" + std::to_string(ops[kDirect]);
    std::printf("%7d %12.0f %12.0f %6.2f %13s %18s %18s %12s %14s %16s %8s %s\n", clients, rate_r,
                rate_d, rate_d > 0 ? rate_r / rate_d : 0, range, ms_pair(ms[kRemold]).c_str(),
                ms_pair(ms[kDirect]).c_str(), lat_ratio.c_str(), cpu_text(rm_us).c_str(), be.c_str(),
                nops.c_str(), check.c_str());
    std::ostringstream j;
    j << "BENCH_JSON {\"bench\":\"computed_insert\",\"clients\":" << clients
      << ",\"remold_ops_per_s\":" << num_or_null(rate_r, "%.1f") << ",\"direct_ops_per_s\":"
      << num_or_null(rate_d, "%.1f") << ",\"ratio\":" << num_or_null(rate_d > 0 ? rate_r / rate_d : -1)
      << ",\"round_ratio_min\":" << num_or_null(hi > 0 ? lo : -1) << ",\"round_ratio_max\":"
      << num_or_null(hi > 0 ? hi : -1) << ",\"remold_p50_ms\":" << num_or_null(p50[0])
      << ",\"remold_p99_ms\":" << num_or_null(p99[0]) << ",\"direct_p50_ms\":" << num_or_null(p50[1])
      << ",\"direct_p99_ms\":" << num_or_null(p99[1]) << ",\"rounds\":[";
    for (size_t i = 0; i < pairs; ++i)
      j << (i ? "," : "") << "{\"remold\":" << num_or_null(side_cases[kRemold][i]->rate(), "%.1f")
        << ",\"direct\":" << num_or_null(side_cases[kDirect][i]->rate(), "%.1f") << "}";
    j << "],\"cpu_us_per_op\":{\"remold_side\":{\"remold\":" << num_or_null(rm_us) << ",\"backend\":"
      << num_or_null(be_r) << "},\"direct_side\":{\"backend\":" << num_or_null(be_d) << "}}"
      << ",\"ops\":{\"remold\":" << ops[kRemold] << ",\"direct\":" << ops[kDirect] << "},\"errors\":" << errors
      << ",\"ok\":" << (check == "verified" ? "true" : "false") << ",\"check\":\"" << json_escape(check)
      << "\",\"cores\":" << usable_cores() << "}";
    json_lines.push_back(j.str());
  }
  std::printf(
      "\n  op/s = comments per second (median of the rounds), both writes done for direct;\n"
      "  ratio = remold / direct (above 1: remold is faster), round range = that ratio in single\n"
      "  rounds (wide: noisy machine). p50/p99 ms = latency of one comment, every round's samples\n"
      "  together; p50 p99 R/D = remold's percentile / direct's (below 1: remold is faster).\n"
      "  rm cpu / be cpu = CPU microseconds of remold / the backend per comment (? = pid not given).\n"
      "  check: comments stored = inserts acknowledged, and every post's commentCount and\n"
      "  lastCommentAt = count and greatest createdAt of its comments, on the backend directly.\n");
  for (const auto& line : json_lines) std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

void Bench::print_read_table(const std::vector<ReadRow>& rows) {
  std::printf("\n(b) a post with its comment count: findOne of the maintained post (via remold, direct)\n"
              "    vs the aggregate over its comments (direct)\n");
  std::printf("%13s %5s %10s %19s %19s %19s %17s %15s %18s %6s %s\n", "comments/post", "posts",
              "load s", "findOne remold ms", "findOne direct ms", "aggregate ms", "agg/find p50 p99",
              "find R/D p50", "be cpu us F/A", "n", "check");
  for (const ReadRow& r : rows) {
    const double p50[3] = {percentile(r.ms[0], 0.5), percentile(r.ms[1], 0.5), percentile(r.ms[2], 0.5)};
    const double p99[3] = {percentile(r.ms[0], 0.99), percentile(r.ms[1], 0.99), percentile(r.ms[2], 0.99)};
    std::string check = "verified";
    if (!r.ok())
      check = "FAILED: " + r.verify_message +
              (r.errors ? std::to_string(r.errors) + " failed reads, first: " + r.first_error : "");
    const std::string agg_ratio = ratio_text(p50[2], p50[0]) + " " + ratio_text(p99[2], p99[0]);
    const std::string be = cpu_text(r.cpu_backend_us[kFindDirect]) + "/" + cpu_text(r.cpu_backend_us[kAggregate]);
    std::printf("%13lld %5lld %10.2f %19s %19s %19s %17s %15s %18s %6zu %s\n",
                static_cast<long long>(r.per_post), static_cast<long long>(r.posts), r.load_seconds,
                ms_pair(r.ms[0]).c_str(), ms_pair(r.ms[1]).c_str(), ms_pair(r.ms[2]).c_str(),
                agg_ratio.c_str(), ratio_text(p50[0], p50[1]).c_str(), be.c_str(), r.ms[0].size(),
                check.c_str());
  }
  std::printf(
      "\n  p50/p99 ms = latency of one read (with n <= 100 reads, p99 is the slowest one).\n"
      "  agg/find = the aggregate's percentile / the remold findOne's (how much the maintained\n"
      "  field saves a reader); find R/D = findOne through remold / findOne direct (the hop).\n"
      "  load s = loading the cell's comments through remold (insertMany, unordered).\n"
      "  be cpu us F/A = backend CPU microseconds per direct findOne / per aggregate (? = pid\n"
      "  not given). check: the maintained posts and every side's count and greatest createdAt\n"
      "  against the generated comments, and the count of every timed read.\n");
  for (const ReadRow& r : rows) {
    std::ostringstream j;
    j << "BENCH_JSON {\"bench\":\"computed_read\",\"comments_per_post\":" << r.per_post
      << ",\"posts\":" << r.posts << ",\"load_seconds\":" << num_or_null(r.load_seconds)
      << ",\"load_cpu_s\":{\"remold\":" << num_or_null(r.load_cpu_remold) << ",\"backend\":"
      << num_or_null(r.load_cpu_backend) << "}";
    const char* keys[3] = {"find_remold", "find_direct", "aggregate"};
    for (int s = 0; s < kReadSides; ++s)
      j << ",\"" << keys[s] << "\":{\"p50_ms\":" << num_or_null(r.ms[s].empty() ? -1 : percentile(r.ms[s], 0.5))
        << ",\"p99_ms\":" << num_or_null(r.ms[s].empty() ? -1 : percentile(r.ms[s], 0.99))
        << ",\"n\":" << r.ms[s].size() << ",\"cpu_us\":{\"remold\":" << num_or_null(r.cpu_remold_us[s])
        << ",\"backend\":" << num_or_null(r.cpu_backend_us[s]) << "}}";
    const double a = r.ms[2].empty() ? -1 : percentile(r.ms[2], 0.5);
    const double f = r.ms[0].empty() ? -1 : percentile(r.ms[0], 0.5);
    j << ",\"aggregate_vs_find_remold_p50\":" << num_or_null(a > 0 && f > 0 ? a / f : -1)
      << ",\"errors\":" << r.errors << ",\"ok\":" << (r.ok() ? "true" : "false")
      << ",\"load1\":" << r.load << ",\"cores\":" << usable_cores() << "}";
    std::printf("%s\n", j.str().c_str());
  }
  std::fflush(stdout);
}

int Bench::run() {
  admin_ = connect(cfg_.direct, "computed_bench");
  print_header();
  bool all_ok = true;

  if (cfg_.run_insert) {
    if (cfg_.warmup > 0) {
      int64_t n = 0;
      for (int side : {kRemold, kDirect}) {
        InsertCase w = run_insert(side, 1, -1, cfg_.warmup, true);
        n += w.ops;
        if (!w.ok()) {
          std::printf("warm-up on %s FAILED: %s%s\n", side_name(side),
                      w.errors ? (std::to_string(w.errors) + " failed inserts, first: " + w.first_error + "; ").c_str() : "",
                      w.verify_message.c_str());
          all_ok = false;
        }
      }
      std::printf("warm-up: %lld untimed inserts\n", static_cast<long long>(n));
    }
    std::vector<InsertCase> cases;
    for (int round = 0; round < cfg_.rounds; ++round) {
      for (int clients : cfg_.clients) {
        const int first = round % 2 == 0 ? kRemold : kDirect;
        for (int side : {first, 1 - first}) {
          cases.push_back(run_insert(side, clients, round, cfg_.seconds, true));
          const InsertCase& c = cases.back();
          std::printf("  round %d, %d clients, %-6s: %lld comments in %.2f s = %.0f/s, p50 %.2f ms%s%s\n",
                      round, clients, side_name(side), static_cast<long long>(c.ops), c.seconds, c.rate(),
                      percentile(c.ms, 0.5), c.ok() ? "" : "; FAILED: ",
                      c.ok() ? "" : ((c.errors ? c.first_error + "; " : "") + c.verify_message).c_str());
          std::fflush(stdout);
          all_ok = all_ok && c.ok();
        }
      }
    }
    print_insert_table(cases);
  }

  if (cfg_.run_read) {
    for (int side = 0; side < kReadSides; ++side)
      read_client_[side] = connect(side == kFindRemold ? cfg_.proxy : cfg_.direct, "computed_bench");
    std::printf("\n");
    std::vector<ReadRow> rows;
    for (int64_t size : cfg_.read_sizes) {
      rows.push_back(run_read(size));
      const ReadRow& r = rows.back();
      std::printf("  read cell %lld comments/post: %zu rounds, p50 findOne remold %.3f ms, direct %.3f ms, "
                  "aggregate %.3f ms%s%s\n",
                  static_cast<long long>(size), r.ms[0].size(), percentile(r.ms[0], 0.5),
                  percentile(r.ms[1], 0.5), percentile(r.ms[2], 0.5), r.ok() ? "" : "; FAILED: ",
                  r.ok() ? "" : (r.verify_message + r.first_error).c_str());
      std::fflush(stdout);
      all_ok = all_ok && r.ok();
    }
    print_read_table(rows);
  }

  if (!cfg_.keep) {
    // The ruled collections are dropped through remold (so it forgets
    // whatever it ensured on them), the application's directly.
    ClientPtr proxy = connect(cfg_.proxy, "computed_bench");
    for (const char* coll : {"comments", "posts"}) {
      bson_t cmd;
      bson_init(&cmd);
      BSON_APPEND_UTF8(&cmd, "drop", coll);
      command(proxy.get(), kRuledDb, &cmd, true);
      bson_destroy(&cmd);
    }
    command(admin_.get(), kDirectDb, json(R"({"dropDatabase": 1})").get(), true);
  }
  std::printf("\nload average after the run: %.2f\n", load_average());
  if (!all_ok) std::printf("some cases failed their checks (see the check column)\n");
  std::fflush(stdout);
  return all_ok ? 0 : 1;
}

}  // namespace
}  // namespace computed_bench

int main(int argc, char** argv) {
  const auto cfg = computed_bench::parse_args(argc, argv);
  return bench_common::run_main("computed_bench", [&] { return computed_bench::Bench(cfg).run(); });
}
