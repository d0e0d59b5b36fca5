// Cursors through remold: a find read across several getMore batches, a live
// cursor killed by the driver (killCursors) so the server forgets it, a
// killCursors command naming live and unknown cursors, and two cursors
// advanced alternately. The wire traffic is checked with APM command
// events.

#include <algorithm>

#include "driver.h"

namespace e2e {
namespace {

using CursorTest = DriverTest;

constexpr int kDocs = 10;
constexpr int kBatchSize = 3;  // 10 documents: 3 in the find reply, then >= 3 getMores

std::vector<Bson> Sequence(int count) {
  std::vector<Bson> docs;
  for (int i = 0; i < count; ++i) docs.push_back(Bson().Add("_id", i).Add("pad", std::string(100, 'x')));
  return docs;
}

std::optional<int64_t> CursorId(const CommandEvent& event) { return event.body.Int("cursor.id"); }

TEST_F(CursorTest, FindReadsAllBatchesThroughGetMore) {
  CollectionPtr coll = Collection();
  InsertAll(coll.get(), Sequence(kDocs));
  log_.Clear();

  CursorPtr cursor(mongoc_collection_find_with_opts(
      coll.get(), Json("{}").get(), Bson().Add("sort", Json(R"({"_id": 1})")).Add("batchSize", kBatchSize).get(),
      nullptr));
  std::vector<Bson> docs = Drain(cursor.get());
  ASSERT_EQ(docs.size(), static_cast<size_t>(kDocs));
  for (int i = 0; i < kDocs; ++i) EXPECT_EQ(docs[i].Int("_id"), i);

  std::vector<CommandEvent> finds = log_.Events("find", Phase::kSucceeded);
  ASSERT_EQ(finds.size(), 1u);
  std::optional<int64_t> cursor_id = CursorId(finds[0]);
  ASSERT_TRUE(cursor_id.has_value()) << finds[0].body.Json();
  EXPECT_NE(*cursor_id, 0) << "the first batch cannot hold all documents";
  EXPECT_EQ(finds[0].body.DocArray("cursor.firstBatch").size(), static_cast<size_t>(kBatchSize));

  std::vector<CommandEvent> started = log_.Events("getMore", Phase::kStarted);
  std::vector<CommandEvent> replies = log_.Events("getMore", Phase::kSucceeded);
  EXPECT_GE(started.size(), 3u);
  EXPECT_LE(started.size(), 4u);
  EXPECT_EQ(replies.size(), started.size());
  EXPECT_EQ(log_.Count("getMore", Phase::kFailed), 0u);
  for (const CommandEvent& getmore : started) {
    EXPECT_EQ(getmore.body.Int("getMore"), cursor_id) << getmore.body.Json();
    EXPECT_EQ(getmore.body.Int("batchSize"), kBatchSize) << getmore.body.Json();
  }
  size_t returned = 0;
  for (const CommandEvent& reply : replies) {
    size_t batch = reply.body.DocArray("cursor.nextBatch").size();
    EXPECT_LE(batch, static_cast<size_t>(kBatchSize)) << reply.body.Json();
    returned += batch;
  }
  EXPECT_EQ(returned, static_cast<size_t>(kDocs - kBatchSize));
  ASSERT_FALSE(replies.empty());
  EXPECT_EQ(CursorId(replies.back()), 0) << "the last getMore must close the cursor";
}

TEST_F(CursorTest, DestroyingLiveCursorKillsIt) {
  CollectionPtr coll = Collection();
  InsertAll(coll.get(), Sequence(kDocs));
  log_.Clear();

  CursorPtr cursor(mongoc_collection_find_with_opts(coll.get(), Json("{}").get(),
                                                    Bson().Add("batchSize", 2).get(), nullptr));
  const bson_t* doc = nullptr;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(mongoc_cursor_next(cursor.get(), &doc));  // forces one getMore
  EXPECT_EQ(log_.Count("getMore", Phase::kSucceeded), 1u);
  const int64_t cursor_id = mongoc_cursor_get_id(cursor.get());
  ASSERT_NE(cursor_id, 0);
  cursor.reset();

  std::vector<CommandEvent> kills = log_.Events("killCursors", Phase::kStarted);
  ASSERT_EQ(kills.size(), 1u) << "the driver did not send killCursors";
  EXPECT_EQ(kills[0].body.IntArray("cursors"), std::vector<int64_t>{cursor_id});
  std::vector<CommandEvent> killed = log_.Events("killCursors", Phase::kSucceeded);
  ASSERT_EQ(killed.size(), 1u) << "killCursors failed";
  EXPECT_EQ(killed[0].body.IntArray("cursorsKilled"), std::vector<int64_t>{cursor_id}) << killed[0].body.Json();
  EXPECT_TRUE(killed[0].body.IntArray("cursorsNotFound").empty()) << killed[0].body.Json();

  // The cursor is gone: getMore on it is CursorNotFound (43).
  bson_error_t error;
  std::optional<Bson> reply = RunCommand(Bson().Add("getMore", cursor_id).Add("collection", "c"), &error);
  EXPECT_FALSE(reply) << reply->Json();
  EXPECT_EQ(error.code, 43u) << error.message;
}

TEST_F(CursorTest, KillCursorsCommandReportsEachCursor) {
  CollectionPtr coll = Collection();
  InsertAll(coll.get(), Sequence(kDocs));

  // Two live cursors, and an id that names no cursor.
  Bson opts = Bson().Add("batchSize", 1);
  CursorPtr first(mongoc_collection_find_with_opts(coll.get(), Json("{}").get(), opts.get(), nullptr));
  CursorPtr second(mongoc_collection_find_with_opts(coll.get(), Json("{}").get(), opts.get(), nullptr));
  const bson_t* doc = nullptr;
  ASSERT_TRUE(mongoc_cursor_next(first.get(), &doc));
  ASSERT_TRUE(mongoc_cursor_next(second.get(), &doc));
  const int64_t a = mongoc_cursor_get_id(first.get());
  const int64_t b = mongoc_cursor_get_id(second.get());
  ASSERT_NE(a, 0);
  ASSERT_NE(b, 0);
  ASSERT_NE(a, b);
  const int64_t unknown = std::max(a, b) + 1000;

  Bson ids;
  bson_append_int64(ids.get(), "0", -1, a);
  bson_append_int64(ids.get(), "1", -1, unknown);
  bson_append_int64(ids.get(), "2", -1, b);
  Bson command = Bson().Add("killCursors", "c");
  bson_append_array(command.get(), "cursors", -1, ids.get());
  bson_error_t error;
  std::optional<Bson> reply = RunCommand(command, &error);
  ASSERT_TRUE(reply) << error.message;
  std::vector<int64_t> killed = reply->IntArray("cursorsKilled");
  std::sort(killed.begin(), killed.end());
  EXPECT_EQ(killed, (std::vector<int64_t>{std::min(a, b), std::max(a, b)})) << reply->Json();
  EXPECT_EQ(reply->IntArray("cursorsNotFound"), std::vector<int64_t>{unknown}) << reply->Json();

  // Both are gone for the driver too.
  EXPECT_FALSE(mongoc_cursor_next(first.get(), &doc));
  EXPECT_TRUE(mongoc_cursor_error(first.get(), &error));
  EXPECT_EQ(error.code, 43u) << error.message;
}

TEST_F(CursorTest, InterleavedCursorsStaySeparate) {
  CollectionPtr coll = Collection();
  std::vector<Bson> docs;
  for (int i = 0; i < 40; ++i) docs.push_back(Bson().Add("_id", i).Add("even", i % 2 == 0));
  InsertAll(coll.get(), docs);

  // Two live cursors on one connection, advanced alternately, each needing
  // several getMores: every getMore must reach its own cursor.
  Bson opts = Bson().Add("sort", Json(R"({"_id": 1})")).Add("batchSize", 3);
  CursorPtr evens(mongoc_collection_find_with_opts(coll.get(), Json(R"({"even": true})").get(), opts.get(), nullptr));
  CursorPtr odds(mongoc_collection_find_with_opts(coll.get(), Json(R"({"even": false})").get(), opts.get(), nullptr));
  const bson_t* doc = nullptr;
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(mongoc_cursor_next(evens.get(), &doc)) << "evens ended early at " << i;
    EXPECT_EQ(Bson(doc).Int("_id"), 2 * i);
    ASSERT_TRUE(mongoc_cursor_next(odds.get(), &doc)) << "odds ended early at " << i;
    EXPECT_EQ(Bson(doc).Int("_id"), 2 * i + 1);
  }
  EXPECT_FALSE(mongoc_cursor_next(evens.get(), &doc));
  EXPECT_FALSE(mongoc_cursor_next(odds.get(), &doc));
  bson_error_t error;
  EXPECT_FALSE(mongoc_cursor_error(evens.get(), &error)) << error.message;
  EXPECT_FALSE(mongoc_cursor_error(odds.get(), &error)) << error.message;
  EXPECT_NE(log_.Events("find", Phase::kSucceeded).at(0).body.Int("cursor.id"),
            log_.Events("find", Phase::kSucceeded).at(1).body.Int("cursor.id"));
  EXPECT_GE(log_.Count("getMore", Phase::kSucceeded), 12u);
}

}  // namespace
}  // namespace e2e
