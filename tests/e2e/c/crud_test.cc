// CRUD through remold with mongo-c-driver: inserts, find options, updates,
// replace, deletes, upserts, aggregate, reads with a secondaryPreferred read
// preference, counts, distinct and indexes. Each test checks the driver's
// reply fields and then the stored data.

#include <algorithm>
#include <map>

#include "driver.h"
#include "harness.h"

namespace e2e {
namespace {

using CrudTest = DriverTest;

// {_id: i, group: i % 3, v: 100 - i, tag: "t<i>"} for i in [0, count).
std::vector<Bson> NumberedDocs(int count) {
  std::vector<Bson> docs;
  for (int i = 0; i < count; ++i) {
    docs.push_back(Bson().Add("_id", i).Add("group", i % 3).Add("v", 100 - i).Add("tag", "t" + std::to_string(i)));
  }
  return docs;
}

std::vector<std::string> FindAll(mongoc_collection_t* collection, const char* opts_json = R"({"sort": {"_id": 1}})") {
  CursorPtr cursor(mongoc_collection_find_with_opts(collection, Json("{}").get(), Json(opts_json).get(), nullptr));
  return ToJson(Drain(cursor.get()));
}

int64_t CountMatching(mongoc_collection_t* collection, const char* filter_json) {
  bson_error_t error;
  int64_t count = mongoc_collection_count_documents(collection, Json(filter_json).get(), nullptr, nullptr, nullptr, &error);
  EXPECT_GE(count, 0) << error.message;
  return count;
}

TEST_F(CrudTest, InsertOneAndInsertMany) {
  CollectionPtr coll = Collection();
  Bson reply;
  bson_error_t error;
  ASSERT_TRUE(mongoc_collection_insert_one(coll.get(), Json(R"({"_id": 1, "name": "one"})").get(), nullptr,
                                           reply.out(), &error))
      << error.message;
  EXPECT_EQ(reply.Int("insertedCount"), 1);

  std::vector<Bson> many = {Json(R"({"_id": 2, "name": "two"})"), Json(R"({"_id": 3, "name": "three"})"),
                            Json(R"({"_id": 4, "nested": {"a": [1, 2, {"b": null}]}})")};
  std::vector<const bson_t*> pointers = Pointers(many);
  ASSERT_TRUE(mongoc_collection_insert_many(coll.get(), pointers.data(), pointers.size(), nullptr, reply.out(), &error))
      << error.message;
  EXPECT_EQ(reply.Int("insertedCount"), 3);

  // A bulk of 200 inserts, sent as an OP_MSG document sequence.
  BulkPtr bulk(mongoc_collection_create_bulk_operation_with_opts(coll.get(), nullptr));
  for (int i = 100; i < 300; ++i) {
    ASSERT_TRUE(mongoc_bulk_operation_insert_with_opts(bulk.get(), Bson().Add("_id", i).get(), nullptr, &error));
  }
  ASSERT_NE(mongoc_bulk_operation_execute(bulk.get(), reply.out(), &error), 0u) << error.message << reply.Json();
  EXPECT_EQ(reply.Int("nInserted"), 200);

  std::vector<std::string> stored = FindAll(coll.get());
  ASSERT_EQ(stored.size(), 204u);
  EXPECT_EQ(stored[0], Normalized(R"({"_id": 1, "name": "one"})"));
  EXPECT_EQ(stored[3], Normalized(R"({"_id": 4, "nested": {"a": [1, 2, {"b": null}]}})"));
  EXPECT_EQ(stored[203], Normalized(R"({"_id": 299})"));
}

TEST_F(CrudTest, InsertWithoutIdKeepsDriverGeneratedObjectId) {
  CollectionPtr coll = Collection();
  Bson doc = Json(R"({"x": 1})");
  bson_error_t error;
  ASSERT_TRUE(mongoc_collection_insert_one(coll.get(), doc.get(), nullptr, nullptr, &error)) << error.message;
  CursorPtr cursor(mongoc_collection_find_with_opts(coll.get(), Json("{}").get(), nullptr, nullptr));
  std::vector<Bson> stored = Drain(cursor.get());
  ASSERT_EQ(stored.size(), 1u);
  const Bson& found = stored[0];
  bson_iter_t iter;
  ASSERT_TRUE(bson_iter_init_find(&iter, found.get(), "_id")) << found.Json();
  EXPECT_EQ(bson_iter_type(&iter), BSON_TYPE_OID);
  EXPECT_EQ(found.Int("x"), 1);
}

TEST_F(CrudTest, FindWithFilterSortProjectionLimitAndSkip) {
  CollectionPtr coll = Collection();
  InsertAll(coll.get(), NumberedDocs(20));

  CursorPtr cursor(mongoc_collection_find_with_opts(
      coll.get(), Json(R"({"group": 1})").get(),
      Json(R"({"sort": {"v": 1}, "projection": {"_id": 0, "v": 1}, "limit": 4, "skip": 1})").get(), nullptr));
  // group 1 has i = 1, 4, ..., 19, so v = 99, 96, ..., 81; ascending, skip 1.
  EXPECT_EQ(ToJson(Drain(cursor.get())),
            (std::vector<std::string>{Normalized(R"({"v": 84})"), Normalized(R"({"v": 87})"),
                                      Normalized(R"({"v": 90})"), Normalized(R"({"v": 93})")}));

  cursor.reset(mongoc_collection_find_with_opts(coll.get(), Json(R"({"v": {"$gt": 95}, "tag": {"$ne": "t2"}})").get(),
                                                Json(R"({"sort": {"_id": -1}, "projection": {"tag": 1}})").get(),
                                                nullptr));
  EXPECT_EQ(ToJson(Drain(cursor.get())),
            (std::vector<std::string>{Normalized(R"({"_id": 4, "tag": "t4"})"), Normalized(R"({"_id": 3, "tag": "t3"})"),
                                      Normalized(R"({"_id": 1, "tag": "t1"})"), Normalized(R"({"_id": 0, "tag": "t0"})")}));
}

TEST_F(CrudTest, UpdateOneUpdateManyAndReplace) {
  CollectionPtr coll = Collection();
  std::vector<Bson> docs;
  for (int i = 0; i < 10; ++i) docs.push_back(Bson().Add("_id", i).Add("g", i < 5 ? "a" : "b").Add("n", 0));
  InsertAll(coll.get(), docs);

  Bson reply;
  bson_error_t error;
  ASSERT_TRUE(mongoc_collection_update_one(coll.get(), Json(R"({"g": "a"})").get(), Json(R"({"$inc": {"n": 1}})").get(),
                                           nullptr, reply.out(), &error))
      << error.message;
  EXPECT_EQ(reply.Int("matchedCount"), 1);
  EXPECT_EQ(reply.Int("modifiedCount"), 1);
  EXPECT_FALSE(reply.Has("upsertedId"));
  EXPECT_EQ(CountMatching(coll.get(), R"({"g": "a", "n": 1})"), 1);

  ASSERT_TRUE(mongoc_collection_update_many(coll.get(), Json(R"({"g": "b"})").get(),
                                            Json(R"({"$set": {"n": 5}, "$push": {"log": "m"}})").get(), nullptr,
                                            reply.out(), &error))
      << error.message;
  EXPECT_EQ(reply.Int("matchedCount"), 5);
  EXPECT_EQ(reply.Int("modifiedCount"), 5);

  // A no-op update matches but modifies nothing.
  ASSERT_TRUE(mongoc_collection_update_many(coll.get(), Json(R"({"g": "b"})").get(), Json(R"({"$set": {"n": 5}})").get(),
                                            nullptr, reply.out(), &error))
      << error.message;
  EXPECT_EQ(reply.Int("matchedCount"), 5);
  EXPECT_EQ(reply.Int("modifiedCount"), 0);

  ASSERT_TRUE(mongoc_collection_replace_one(coll.get(), Json(R"({"_id": 7})").get(),
                                            Json(R"({"g": "c", "replaced": true})").get(), nullptr, reply.out(), &error))
      << error.message;
  EXPECT_EQ(reply.Int("matchedCount"), 1);
  EXPECT_EQ(reply.Int("modifiedCount"), 1);

  std::vector<std::string> stored = FindAll(coll.get(), R"({"sort": {"_id": 1}, "projection": {"n": 0}})");
  ASSERT_EQ(stored.size(), 10u);
  EXPECT_EQ(stored[6], Normalized(R"({"_id": 6, "g": "b", "log": ["m"]})"));
  EXPECT_EQ(stored[7], Normalized(R"({"_id": 7, "g": "c", "replaced": true})"));
  EXPECT_EQ(CountMatching(coll.get(), R"({"n": 5})"), 4);
}

TEST_F(CrudTest, DeleteOneAndDeleteMany) {
  CollectionPtr coll = Collection();
  InsertAll(coll.get(), NumberedDocs(12));  // groups 0, 1, 2 with 4 documents each

  Bson reply;
  bson_error_t error;
  ASSERT_TRUE(mongoc_collection_delete_one(coll.get(), Json(R"({"group": 0})").get(), nullptr, reply.out(), &error))
      << error.message;
  EXPECT_EQ(reply.Int("deletedCount"), 1);
  ASSERT_TRUE(mongoc_collection_delete_many(coll.get(), Json(R"({"group": 1})").get(), nullptr, reply.out(), &error))
      << error.message;
  EXPECT_EQ(reply.Int("deletedCount"), 4);
  ASSERT_TRUE(mongoc_collection_delete_many(coll.get(), Json(R"({"group": 7})").get(), nullptr, reply.out(), &error))
      << error.message;
  EXPECT_EQ(reply.Int("deletedCount"), 0);

  EXPECT_EQ(CountMatching(coll.get(), "{}"), 7);
  EXPECT_EQ(CountMatching(coll.get(), R"({"group": 0})"), 3);
  EXPECT_EQ(CountMatching(coll.get(), R"({"group": 1})"), 0);
  EXPECT_EQ(CountMatching(coll.get(), R"({"group": 2})"), 4);
}

TEST_F(CrudTest, UpsertReportsUpsertedId) {
  CollectionPtr coll = Collection();
  Bson reply;
  bson_error_t error;
  Bson upsert = Json(R"({"upsert": true})");

  ASSERT_TRUE(mongoc_collection_update_one(coll.get(), Json(R"({"_id": "u1"})").get(), Json(R"({"$set": {"x": 1}})").get(),
                                           upsert.get(), reply.out(), &error))
      << error.message;
  EXPECT_EQ(reply.Int("matchedCount"), 0);
  EXPECT_EQ(reply.Int("modifiedCount"), 0);
  EXPECT_EQ(reply.Int("upsertedCount"), 1);
  EXPECT_EQ(reply.Str("upsertedId"), std::string("u1"));

  // Same filter again: now it matches, nothing is upserted.
  ASSERT_TRUE(mongoc_collection_update_one(coll.get(), Json(R"({"_id": "u1"})").get(), Json(R"({"$inc": {"x": 1}})").get(),
                                           upsert.get(), reply.out(), &error))
      << error.message;
  EXPECT_EQ(reply.Int("matchedCount"), 1);
  EXPECT_EQ(reply.Int("modifiedCount"), 1);
  EXPECT_EQ(reply.Int("upsertedCount"), 0);
  EXPECT_FALSE(reply.Has("upsertedId"));

  // No _id in the filter: the server generates an ObjectId and reports it.
  ASSERT_TRUE(mongoc_collection_replace_one(coll.get(), Json(R"({"key": "k"})").get(), Json(R"({"key": "k", "y": 2})").get(),
                                            upsert.get(), reply.out(), &error))
      << error.message;
  EXPECT_EQ(reply.Int("upsertedCount"), 1);
  bson_iter_t id;
  ASSERT_TRUE(bson_iter_init_find(&id, reply.get(), "upsertedId")) << reply.Json();
  ASSERT_EQ(bson_iter_type(&id), BSON_TYPE_OID);
  Bson by_id;
  bson_append_iter(by_id.get(), "_id", -1, &id);
  CursorPtr cursor(mongoc_collection_find_with_opts(coll.get(), by_id.get(), nullptr, nullptr));
  std::vector<Bson> found = Drain(cursor.get());
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].Str("key"), std::string("k"));
  EXPECT_EQ(found[0].Int("y"), 2);

  EXPECT_EQ(FindAll(coll.get(), R"({"projection": {"_id": 1, "x": 1}, "sort": {"x": -1}, "limit": 1})"),
            std::vector<std::string>{Normalized(R"({"_id": "u1", "x": 2})")});
}

TEST_F(CrudTest, AggregateGroupsAndSortsAcrossBatches) {
  CollectionPtr coll = Collection();
  InsertAll(coll.get(), NumberedDocs(30));

  // Sum of v over _id >= 3 per group, in batches of one document.
  Bson pipeline = Json(R"({"pipeline": [
      {"$match": {"_id": {"$gte": 3}}},
      {"$group": {"_id": "$group", "total": {"$sum": "$v"}, "n": {"$sum": 1}}},
      {"$sort": {"_id": 1}}]})");
  CursorPtr cursor(mongoc_collection_aggregate(coll.get(), MONGOC_QUERY_NONE, pipeline.get(),
                                               Json(R"({"batchSize": 1})").get(), nullptr));
  std::vector<Bson> groups = Drain(cursor.get());

  std::map<int64_t, std::pair<int64_t, int64_t>> expected;  // group -> (total, n)
  for (int i = 3; i < 30; ++i) {
    expected[i % 3].first += 100 - i;
    expected[i % 3].second += 1;
  }
  ASSERT_EQ(groups.size(), expected.size());
  size_t row = 0;
  for (const auto& [group, totals] : expected) {
    EXPECT_EQ(groups[row].Int("_id"), group) << groups[row].Json();
    EXPECT_EQ(groups[row].Int("total"), totals.first) << groups[row].Json();
    EXPECT_EQ(groups[row].Int("n"), totals.second) << groups[row].Json();
    ++row;
  }
  // MongoDB honours cursor.batchSize; whatever the first batch left out
  // must come through getMore on the same cursor.
  std::vector<CommandEvent> aggregates = log_.Events("aggregate", Phase::kSucceeded);
  ASSERT_EQ(aggregates.size(), 1u);
  size_t first_batch = aggregates[0].body.DocArray("cursor.firstBatch").size();
  EXPECT_GE(log_.Count("getMore", Phase::kSucceeded), groups.size() - first_batch);
}

TEST_F(CrudTest, ReadsWithSecondaryPreferredReadPreference) {
  CollectionPtr coll = Collection();
  InsertAll(coll.get(), NumberedDocs(12));
  // Against a mongos (which remold presents) the driver adds $readPreference.
  ReadPrefsPtr secondary_preferred(mongoc_read_prefs_new(MONGOC_READ_SECONDARY_PREFERRED));

  CursorPtr cursor(mongoc_collection_find_with_opts(coll.get(), Json(R"({"group": 2})").get(),
                                                    Json(R"({"sort": {"_id": 1}, "batchSize": 2})").get(),
                                                    secondary_preferred.get()));
  std::vector<Bson> found = Drain(cursor.get());
  ASSERT_EQ(found.size(), 4u);
  EXPECT_EQ(found[3].Int("_id"), 11);
  if (harness::Current().through_proxy) {
    std::vector<CommandEvent> finds = log_.Events("find", Phase::kStarted);
    ASSERT_EQ(finds.size(), 1u);
    EXPECT_EQ(finds[0].body.Str("$readPreference.mode"), std::string("secondaryPreferred")) << finds[0].body.Json();
  }

  bson_error_t error;
  EXPECT_EQ(mongoc_collection_count_documents(coll.get(), Json(R"({"group": 0})").get(), nullptr,
                                              secondary_preferred.get(), nullptr, &error),
            4)
      << error.message;
}

TEST_F(CrudTest, CountDocumentsEstimatedCountAndDistinct) {
  CollectionPtr coll = Collection();
  InsertAll(coll.get(), NumberedDocs(30));
  bson_error_t error;

  EXPECT_EQ(CountMatching(coll.get(), R"({"group": 1})"), 10);
  EXPECT_EQ(CountMatching(coll.get(), R"({"v": {"$lte": 75}})"), 5);
  int64_t limited = mongoc_collection_count_documents(coll.get(), Json(R"({"group": 2})").get(),
                                                      Json(R"({"skip": 2, "limit": 5})").get(), nullptr, nullptr, &error);
  EXPECT_EQ(limited, 5) << error.message;
  int64_t estimated = mongoc_collection_estimated_document_count(coll.get(), nullptr, nullptr, nullptr, &error);
  EXPECT_EQ(estimated, 30) << error.message;

  Bson reply;
  ASSERT_TRUE(mongoc_collection_read_command_with_opts(
      coll.get(), Json(R"({"distinct": "c", "key": "group"})").get(), nullptr, nullptr, reply.out(), &error))
      << error.message;
  std::vector<int64_t> values = reply.IntArray("values");
  std::sort(values.begin(), values.end());
  EXPECT_EQ(values, (std::vector<int64_t>{0, 1, 2})) << reply.Json();

  ASSERT_TRUE(mongoc_collection_read_command_with_opts(
      coll.get(), Json(R"({"distinct": "c", "key": "v", "query": {"_id": {"$in": [1, 4, 5]}}})").get(), nullptr,
      nullptr, reply.out(), &error))
      << error.message;
  values = reply.IntArray("values");
  std::sort(values.begin(), values.end());
  EXPECT_EQ(values, (std::vector<int64_t>{95, 96, 99})) << reply.Json();
}

TEST_F(CrudTest, CreateIndexesAndListIndexes) {
  CollectionPtr coll = Collection();
  InsertAll(coll.get(), NumberedDocs(5));

  Bson reply;
  bson_error_t error;
  ASSERT_TRUE(mongoc_collection_write_command_with_opts(coll.get(), Json(R"({"createIndexes": "c", "indexes": [
      {"key": {"tag": 1}, "name": "tag_1", "unique": true},
      {"key": {"group": 1, "v": -1}, "name": "group_1_v_-1"}]})").get(), nullptr, reply.out(), &error))
      << error.message;
  EXPECT_EQ(reply.Int("ok"), 1);
  EXPECT_EQ(reply.Int("numIndexesBefore"), 1) << reply.Json();
  EXPECT_EQ(reply.Int("numIndexesAfter"), 3) << reply.Json();

  CursorPtr cursor(mongoc_collection_find_indexes_with_opts(coll.get(), nullptr));
  std::map<std::string, Bson> by_name;
  for (Bson& index : Drain(cursor.get())) by_name.emplace(index.Str("name").value_or("?"), index);
  ASSERT_EQ(by_name.size(), 3u);
  ASSERT_TRUE(by_name.contains("_id_"));
  ASSERT_TRUE(by_name.contains("tag_1"));
  ASSERT_TRUE(by_name.contains("group_1_v_-1"));
  EXPECT_EQ(by_name.at("tag_1").Doc("key")->Json(), Normalized(R"({"tag": 1})"));
  bson_iter_t unique;
  ASSERT_TRUE(bson_iter_init_find(&unique, by_name.at("tag_1").get(), "unique"));
  EXPECT_TRUE(bson_iter_as_bool(&unique));
  EXPECT_EQ(by_name.at("group_1_v_-1").Doc("key")->Json(), Normalized(R"({"group": 1, "v": -1})"));

  // The unique index is enforced.
  Bson duplicate = Json(R"({"_id": 99, "tag": "t0"})");
  EXPECT_FALSE(mongoc_collection_insert_one(coll.get(), duplicate.get(), nullptr, nullptr, &error));
  EXPECT_EQ(error.code, 11000u) << error.message;
}

}  // namespace
}  // namespace e2e
