// computed_bench: what remold's computed rule costs and saves, against the
// application doing the same work itself directly on the backend, with the
// same client code in the same run. The scaffolding (flags, header,
// connections, CPU, threads, rounds, the insert and read tables) is
// pattern_harness's.
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
#include <vector>

namespace computed_bench {
namespace {

using namespace bench_common;

constexpr const char* kRuledDb = "bench_computed";
constexpr const char* kDirectDb = "bench_computed_direct";
constexpr int64_t kT0Ms = 1704067200000;                // 2024-01-01T00:00:00Z
constexpr int64_t kSpreadMs = 30LL * 24 * 3600 * 1000;  // createdAt within 30 days

const char kRule[] =
    "namespace: bench_computed.comments\n"
    "pattern: computed\n"
    "computed:\n"
    "  aggregates:\n"
    "    - target: posts\n"
    "      link: {from: postId, to: _id}\n"
    "      fields:\n"
    "        commentCount: count\n"
    "        lastCommentAt: {max: createdAt}\n";

struct Options {
  bool run_insert = true;
  bool run_read = true;
  WriteSchedule inserts;  // the insert cases: write_rounds.h's defaults
  int64_t posts = 1000;  // posts the inserted comments pick from
  std::vector<int64_t> read_sizes{100, 10000};  // comments per post in the read cells
  int64_t read_posts = 5;                       // posts per read cell
  ReadSchedule reads;    // per read cell: read_rounds.h's defaults
  int batch = 1000;      // comments per insertMany while loading a read cell
};

// The usage lines of the options (the schedules' with their defaults).
const std::string kOptions =
    "  --only insert|read   run one part (default both)\n" + write_schedule_usage(Options{}.inserts) +
    "  --posts N            posts the inserted comments pick from (default 1000)\n"
    "  --read-sizes 100,10000 comments per post in the read cells (default 100,10000)\n"
    "  --read-posts N       posts per read cell (default 5)\n" +
    read_schedule_usage(Options{}.reads) +
    "  --batch N            comments per insertMany while loading a read cell (default 1000)\n";


// ---- documents ---------------------------------------------------------------

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

// ---- sides and results -----------------------------------------------------------

const char* side_db(WriteSide s) { return s == WriteSide::remold ? kRuledDb : kDirectDb; }

// An insert case's tally (write_rounds.h): comments inserted (done; direct:
// and their post updated), latency per comment (remold: its insert; direct:
// insert + update).
const WriteTable kInsertTable{
    .json_name = "computed_insert",
    .title = "(a) comment insert with its maintained post: remold (one insert, remold maintains the post)\n"
             "    vs direct (the application inserts, then updates the post itself)\n",
    .unit = "comment",
    .units = "comments",
    .check_legend =
        "  check: comments stored = inserts acknowledged, and every post's commentCount and\n"
        "  lastCommentAt = count and greatest createdAt of its comments, on the backend directly.\n",
};

// Read sides (read_rounds.h): the maintained post through remold, the same
// post directly, and the aggregate over the comments directly.
enum ComputedReadSide { kFindRemold = kReadRemold, kFindDirect = kReadDirect, kAggregate = kReadApp };
const char* read_side_name(int s) {
  return s == kFindRemold ? "findOne via remold" : s == kFindDirect ? "findOne direct" : "aggregate direct";
}

// The read table (read_rounds.h): a row per comments/post.
const ReadTable kReadTable{
    .json_name = "computed_read",
    .title = "(b) a post with its comment count: findOne of the maintained post (via remold, direct)\n"
             "    vs the aggregate over its comments (direct)\n",
    .key_columns = {{"comments/post", 13}, {"posts", 5}, {"load s", 10}},
    .side_headers = {"findOne remold ms", "findOne direct ms", "aggregate ms"},
    .side_keys = {"find_remold", "find_direct", "aggregate"},
    .progress_names = {"findOne remold", "direct", "aggregate"},
    .ratio_columns = {{{"agg/find p50 p99", 17}, ReadRatio::app_over_remold, true},
                      {{"find R/D p50", 15}, ReadRatio::remold_over_direct, false}},
    .backend_cpu = {"be cpu us F/A", 18},
    .ratio_fields = {{"aggregate_vs_find_remold_p50", ReadRatio::app_over_remold, false}},
    .legend =
        "  p50/p99 ms = latency of one read (with n <= 100 reads, p99 is the slowest one).\n"
        "  agg/find = the aggregate's percentile / the remold findOne's (how much the maintained\n"
        "  field saves a reader); find R/D = findOne through remold / findOne direct (the hop).\n"
        "  load s = loading the cell's comments through remold (insertMany, unordered).\n"
        "  be cpu us F/A = backend CPU microseconds per direct findOne / per aggregate (? = pid\n"
        "  not given). check: the maintained posts and every side's count and greatest createdAt\n"
        "  against the generated comments, and the count of every timed read.\n",
};

struct ReadOutcome {
  bool ok = false;
  int64_t count = -1;
  std::optional<int64_t> last_ms;
  double ms = 0;
  std::string error;
};

class ComputedScenario : public PatternScenario {
 public:
  const char* program() const override { return "computed_bench"; }
  const char* rule() const override { return kRule; }
  const char* options() const override { return kOptions.c_str(); }
  bool set_option(const std::string& flag, const std::string& value) override;
  void check_options() override;
  void describe() const override;
  bool run(Harness& h) override;
  void clean_up(Harness& h) override;

 private:
  bool run_inserts(Harness& h);
  bool run_reads(Harness& h);
  void reset(Harness& h, WriteSide side, int64_t posts);
  WriteCase run_insert(Harness& h, WriteSide side, int clients, int round, double seconds);
  std::string verify_posts(Harness& h, const char* db, int64_t expected_comments,
                           std::optional<int64_t> per_post = std::nullopt);
  ReadCell run_read(Harness& h, int64_t per_post);
  ReadOutcome read(int side, int64_t post);

  Options opt_;
  std::vector<ClientPtr> read_client_;  // by ReadSide
};

bool ComputedScenario::set_option(const std::string& flag, const std::string& value) {
  auto int_arg = [&](int lo, int hi) { return static_cast<int>(parse_int(flag, value, lo, hi)); };
  if (flag == "--only") {
    if (value == "insert") opt_.run_read = false;
    else if (value == "read") opt_.run_insert = false;
    else usage_error("--only expects insert or read, got '" + value + "'");
  }
  else if (flag == "--posts") opt_.posts = parse_int(flag, value, 1, 10'000'000);
  else if (flag == "--read-sizes") opt_.read_sizes = parse_int_list(flag, value, 1, 10'000'000);
  else if (flag == "--read-posts") opt_.read_posts = parse_int(flag, value, 1, 100'000);
  else if (flag == "--batch") opt_.batch = int_arg(1, 100000);
  else if (!set_read_option(opt_.reads, flag, value) && !set_write_option(opt_.inserts, flag, value))
    return false;
  return true;
}

void ComputedScenario::check_options() {
  check_read_schedule(opt_.reads);
}

void ComputedScenario::describe() const {
  std::printf("  remold: bench_computed.comments written through remold, which maintains\n"
              "    bench_computed.posts; direct: bench_computed_direct, written by the bench\n"
              "  clients: one connection per client thread, closed loop\n");
  if (opt_.run_insert) {
    const std::string clients = clients_text(opt_.inserts.clients);
    std::printf(
        "  (a) insert: a comment {_id, postId, createdAt, author, text} of a random post of %lld:\n"
        "      remold = insert_one into bench_computed.comments through remold (remold maintains\n"
        "      the post); direct = the application's two writes on bench_computed_direct:\n"
        "      insert_one of the comment, then update_one of its post {$inc: {commentCount: 1},\n"
        "      $max: {lastCommentAt}}; latency per comment (both writes for direct)\n"
        "      %.3g s untimed per side, then %d rounds x clients %s x (remold, direct) of %.3g s,\n"
        "      in ABBA order; every case verified on the backend afterwards\n",
        static_cast<long long>(opt_.posts), opt_.inserts.warmup, opt_.inserts.rounds, clients.c_str(), opt_.inserts.seconds);
  }
  if (opt_.run_read)
    std::printf(
        "  (b) read \"a post with its comment count\" (%lld posts per cell, loaded through remold\n"
        "      with insertMany of %d, with a {postId: 1} index on the comments): findOne({_id},\n"
        "      projection {commentCount, lastCommentAt}) of the maintained post through remold\n"
        "      and directly, against aggregate [{$match: {postId}}, {$group: {_id: null,\n"
        "      commentCount: {$sum: 1}, lastCommentAt: {$max: \"$createdAt\"}}}] directly;\n"
        "      %d untimed reads per side, then rounds of one read per side (a random post,\n"
        "      the order rotating) for at least %.3g s and %d rounds\n",
        static_cast<long long>(opt_.read_posts), opt_.batch, opt_.reads.warmup, opt_.reads.limits.seconds,
        opt_.reads.limits.min_rounds);
}

// Empties one side's comments and posts (direct deletes) and inserts posts
// 0..posts-1 directly, with no maintained field.
void ComputedScenario::reset(Harness& h, WriteSide side, int64_t posts) {
  mongoc_client_t* direct = h.admin(Via::direct);
  const char* db = side_db(side);
  for (const char* coll : {"comments", "posts"}) delete_all(direct, db, coll);
  CollectionPtr coll = collection(direct, db, "posts");
  for (int64_t begin = 0; begin < posts; begin += 1000) {
    Documents docs;
    for (int64_t p = begin; p < std::min<int64_t>(posts, begin + 1000); ++p) {
      char title[32];
      std::snprintf(title, sizeof title, "post %lld", static_cast<long long>(p));
      docs.add(BCON_NEW("_id", BCON_INT64(p), "title", BCON_UTF8(title)));
    }
    const InsertResult inserted = insert_many(coll.get(), docs.data(), docs.size(), nullptr);
    if (!inserted.ok) throw std::runtime_error(std::string("inserting posts on ") + db + ": " + inserted.error);
  }
}

// Every post's maintained fields against its comments, on the backend
// directly. Returns "" when all agree, else what differs (first few).
std::string ComputedScenario::verify_posts(Harness& h, const char* db, int64_t expected_comments,
                                           std::optional<int64_t> per_post) {
  std::ostringstream msg;
  CollectionPtr comments = collection(h.admin(Via::direct), db, "comments");
  CollectionPtr posts = collection(h.admin(Via::direct), db, "posts");
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
  // Sorted on the server: an unsorted cursor of several batches may return
  // a post updated meanwhile twice on DocumentDB (docs/backends.md, 8).
  cursor = mongoc_collection_find_with_opts(posts.get(), json("{}").get(), json(R"({"sort": {"_id": 1}})").get(),
                                            nullptr);
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
          << ", greatest createdAt " << t.last
          << (per_post ? " (generated: " + std::to_string(*per_post) + ")" : "") << "; ";
  }
  if (mongoc_cursor_error(cursor, &error)) msg << "reading posts failed: " << error.message << "; ";
  mongoc_cursor_destroy(cursor);
  if (bad) msg << bad << " of " << seen << " posts wrong; ";
  if (sum != n) msg << "commentCount adds up to " << sum << ", " << n << " comments stored; ";
  return msg.str();
}

// One closed-loop insert case of `seconds` on a freshly reset side, verified.
WriteCase ComputedScenario::run_insert(Harness& h, WriteSide side, int clients, int round, double seconds) {
  reset(h, side, opt_.posts);
  WriteCase result(static_cast<int>(side), clients, round);
  const char* db = side_db(side);
  auto prepare = [&](mongoc_client_t* client, int thread) -> Operation {
    SharedCollection comments = shared_collection(client, db, "comments");
    SharedCollection posts = shared_collection(client, db, "posts");
    std::mt19937_64 rng(thread_seed(round, static_cast<int>(side), clients, thread));
    return [this, side, comments, posts, rng](Tally& tally) mutable {
      const int64_t post = static_cast<int64_t>(rng() % static_cast<uint64_t>(opt_.posts));
      const int64_t created = kT0Ms + static_cast<int64_t>(rng() % static_cast<uint64_t>(kSpreadMs));
      BsonPtr doc(comment_bson(post, created, static_cast<int>(rng() % 50),
                               40 + static_cast<int>(rng() % 120)));
      BsonPtr selector, update;
      if (side == WriteSide::direct) {
        selector.reset(BCON_NEW("_id", BCON_INT64(post)));
        update.reset(BCON_NEW("$inc", "{", "commentCount", BCON_INT32(1), "}",
                              "$max", "{", "lastCommentAt", BCON_DATE_TIME(created), "}"));
      }
      bson_error_t error;
      const auto start = Clock::now();
      bool ok = mongoc_collection_insert_one(comments.get(), doc.get(), nullptr, nullptr, &error);
      if (ok && side == WriteSide::direct)
        ok = update_one_matching(posts.get(), selector.get(), update.get(), "update of post", post, &error);
      tally.record(ok, ms_since(start), error.message);
      return true;
    };
  };
  const Via via = side == WriteSide::remold ? Via::remold : Via::direct;
  result.run = run_client_threads(h.connect(via, clients), h.cpu(), seconds, prepare);
  result.verify_message = verify_posts(h, db, result.ops());
  return result;
}

ReadOutcome ComputedScenario::read(int side, int64_t post) {
  ReadOutcome out;
  bson_error_t error;
  mongoc_cursor_t* cursor;
  const auto start = Clock::now();
  if (side == kAggregate) {
    CollectionPtr coll = collection(read_client_[side].get(), kRuledDb, "comments");
    BsonPtr pipeline(BCON_NEW(
        "pipeline", "[",
        "{", "$match", "{", "postId", BCON_INT64(post), "}", "}",
        "{", "$group", "{", "_id", BCON_NULL, "commentCount", "{", "$sum", BCON_INT32(1), "}",
        "lastCommentAt", "{", "$max", BCON_UTF8("$createdAt"), "}", "}", "}",
        "]"));
    cursor = mongoc_collection_aggregate(coll.get(), MONGOC_QUERY_NONE, pipeline.get(), nullptr, nullptr);
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
    CollectionPtr coll = collection(read_client_[side].get(), kRuledDb, "posts");
    BsonPtr filter(BCON_NEW("_id", BCON_INT64(post)));
    static const BsonPtr opts =
        json(R"({"projection": {"commentCount": 1, "lastCommentAt": 1}, "limit": 1, "singleBatch": true})");
    cursor = mongoc_collection_find_with_opts(coll.get(), filter.get(), opts.get(), nullptr);
    const bson_t* doc;
    if (mongoc_cursor_next(cursor, &doc)) {
      out.count = int_at(doc, "commentCount").value_or(-1);
      out.last_ms = date_at(doc, "lastCommentAt");
    }
  }
  out.ok = !mongoc_cursor_error(cursor, &error);
  mongoc_cursor_destroy(cursor);
  out.ms = ms_since(start);
  if (!out.ok) out.error = error.message;
  return out;
}

ReadCell ComputedScenario::run_read(Harness& h, int64_t per_post) {
  ReadCell row;
  row.label = "  read cell " + std::to_string(per_post) + " comments/post";
  reset(h, WriteSide::remold, opt_.read_posts);
  // The index an application running the aggregate would have.
  command(h.admin(Via::direct), kRuledDb,
          json(R"({"createIndexes": "comments", "indexes": [{"key": {"postId": 1}, "name": "postId_1"}]})").get(),
          true);

  // Load: the comments of every post, interleaved post by post, through remold.
  std::mt19937_64 rng(static_cast<uint64_t>(per_post) * 7919u);
  std::map<int64_t, int64_t> expected_last;  // post -> greatest createdAt
  const int64_t total = per_post * opt_.read_posts;
  Documents docs;
  docs.reserve(static_cast<size_t>(total));
  for (int64_t j = 0; j < per_post; ++j) {
    for (int64_t p = 0; p < opt_.read_posts; ++p) {
      const int64_t created = kT0Ms + static_cast<int64_t>(rng() % static_cast<uint64_t>(kSpreadMs));
      auto [it, fresh] = expected_last.emplace(p, created);
      if (!fresh) it->second = std::max(it->second, created);
      docs.add(comment_bson(p, created, static_cast<int>(rng() % 50), 40 + static_cast<int>(rng() % 120)));
    }
  }
  CollectionPtr comments = collection(h.admin(Via::remold), kRuledDb, "comments");
  const LoadTiming load = load_in_batches(comments.get(), docs, opt_.batch, h.cpu(), "comments through remold");
  std::printf("  read cell %lld comments/post: loaded %lld comments through remold in %.2f s (%.0f/s)\n",
              static_cast<long long>(per_post), static_cast<long long>(total), load.seconds,
              static_cast<double>(total) / load.seconds);
  row.key_text = {std::to_string(per_post), std::to_string(opt_.read_posts), fixed_or_unknown(load.seconds, 2)};
  row.key_json = {{"comments_per_post", std::to_string(per_post)},
                  {"posts", std::to_string(opt_.read_posts)},
                  {"load_seconds", number_or_null(load.seconds)},
                  {"load_cpu_s", JsonObject()
                                     .raw("remold", number_or_null(load.cpu.remold))
                                     .raw("backend", number_or_null(load.cpu.backend))
                                     .str()}};
  std::fflush(stdout);

  // Verification: the maintained posts, and every side's answer for every post.
  std::ostringstream msg;
  msg << verify_posts(h, kRuledDb, total, per_post);
  auto note = [&](int side, const ReadOutcome& r) {
    if (!r.ok) row.failures.add(std::string(read_side_name(side)) + ": " + r.error);
  };
  for (int64_t p = 0; p < opt_.read_posts; ++p) {
    for (int side = 0; side < kReadSides; ++side) {
      ReadOutcome r = read(side, p);
      note(side, r);
      if (r.ok && (r.count != per_post || r.last_ms != expected_last[p]))
        msg << read_side_name(side) << " of post " << p << ": count " << r.count << ", last "
            << (r.last_ms ? std::to_string(*r.last_ms) : "missing") << ", generated " << per_post
            << " and " << expected_last[p] << "; ";
    }
  }
  row.verify_message = msg.str();

  // Timed rounds: one read per side of one random post.
  int64_t post = 0;
  auto pick_post = [&] { post = static_cast<int64_t>(rng() % static_cast<uint64_t>(opt_.read_posts)); };
  auto timed_read = [&](int side) -> std::optional<double> {
    ReadOutcome r = read(side, post);
    note(side, r);
    if (r.ok && r.count != per_post)
      row.failures.add(std::string(read_side_name(side)) + ": a timed read returned count " +
               std::to_string(r.count) + ", expected " + std::to_string(per_post));
    if (!r.ok) return std::nullopt;
    return r.ms;
  };
  auto warm = [&](int side, int w) { note(side, read(side, w % opt_.read_posts)); };
  time_read_cell(row, opt_.reads, h.cpu(), warm, pick_post, timed_read);
  return row;
}

// ---- the run ---------------------------------------------------------------------

bool ComputedScenario::run_inserts(Harness& h) {
  return run_write_rounds(opt_.inserts, kInsertTable, [&](WriteSide side, int clients, int round, double seconds) {
    return run_insert(h, side, clients, round, seconds);
  });
}

bool ComputedScenario::run_reads(Harness& h) {
  read_client_ = connect_read_sides(h);
  std::printf("\n");
  return run_read_cells(opt_.read_sizes.size(), kReadTable,
                        [&](size_t cell) { return run_read(h, opt_.read_sizes[cell]); });
}

bool ComputedScenario::run(Harness& h) {
  const bool inserts_ok = !opt_.run_insert || run_inserts(h);
  const bool reads_ok = !opt_.run_read || run_reads(h);
  return inserts_ok && reads_ok;
}

// The ruled collections are dropped through remold (so it forgets whatever
// it ensured on them), the application's directly.
void ComputedScenario::clean_up(Harness& h) {
  for (const char* coll : {"comments", "posts"}) {
    BsonPtr drop(BCON_NEW("drop", BCON_UTF8(coll)));
    command(h.admin(Via::remold), kRuledDb, drop.get(), true);
  }
  command(h.admin(Via::direct), kDirectDb, json(R"({"dropDatabase": 1})").get(), true);
}

}  // namespace
}  // namespace computed_bench

int main(int argc, char** argv) {
  computed_bench::ComputedScenario scenario;
  return bench_common::run_pattern_bench(argc, argv, scenario);
}
