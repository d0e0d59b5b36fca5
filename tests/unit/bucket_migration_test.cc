// The bucket pattern's migration part (patterns/bucket/migration.h): the
// writes that move a batch of readings into buckets and back, and what
// keeps a batch written twice from being stored twice.
#include "patterns/bucket/migration.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ruleset/loader.h"
#include "tests/unit/rule_texts.h"

namespace remold {
namespace {

const BucketRule& Readings(const std::shared_ptr<const RuleSet>& rules) {
  return std::get<BucketRule>(rules->rules().front().pattern);
}

std::shared_ptr<const RuleSet> ReadingsRule() {
  return testing::RulesFromTexts(
      {{"readings.yaml", "namespace: iot.readings\npattern: bucket\nbucket:\n  collection: readings_buckets\n"
                         "  meta: [sensor]\n  time: at\n  span: 1h\n  summaries:\n    temp: [sum]\n"}});
}

Doc Json(std::string_view json) { return *Doc::FromJson(json); }

bool HoldsObjectId(const Doc& doc, const char* key) {
  std::optional<bson_iter_t> value = Find(doc.get(), key);
  return value && BSON_ITER_HOLDS_OID(&*value);
}

std::vector<Doc> Batch() {
  return {Json(R"({"_id": 1, "sensor": "a", "at": {"$date": "2026-03-01T10:05:00Z"}, "temp": 20})"),
          Json(R"({"_id": 2, "sensor": "b", "at": {"$date": "2026-03-01T10:06:00Z"}, "temp": 21})"),
          Json(R"({"_id": 3, "sensor": "a", "at": {"$date": "2026-03-01T10:07:00Z"}, "temp": 22})"),
          Json(R"({"_id": 4, "sensor": "a", "temp": 23})")};
}

TEST(BucketMigration, MovesBetweenTheLogicalAndTheBucketCollection) {
  auto rules = ReadingsRule();
  CollectionMove in = MoveOf(Readings(rules), MigrationDirection::kToRule);
  EXPECT_EQ(in.from.full(), "iot.readings");
  EXPECT_EQ(in.to.full(), "iot.readings_buckets");
  EXPECT_FALSE(in.sources_change);
  EXPECT_EQ(*Doc::FromJson(in.order), Json(R"({"sensor": 1, "at": 1, "_id": 1})"));  // batches fill buckets
  CollectionMove out = MoveOf(Readings(rules), MigrationDirection::kToFlat);
  EXPECT_EQ(out.from.full(), "iot.readings_buckets");
  EXPECT_TRUE(out.sources_change);  // a proxy still serving the rule may add readings
}

TEST(BucketMigration, ABatchBecomesNewBucketsUnderIdsOfItsToken) {
  auto rules = ReadingsRule();
  MovedBatch moved = MovedDocuments(Readings(rules), MigrationDirection::kToRule, Batch(), "run:1");
  ASSERT_EQ(moved.failed.size(), 1u);  // no time: it stays flat, and says why
  EXPECT_EQ(moved.failed[0].first, 3u);
  EXPECT_NE(moved.failed[0].second.find("no 'at' field"), std::string::npos) << moved.failed[0].second;
  ASSERT_EQ(moved.upserts.size(), 2u);  // sensor a's two readings share a bucket
  EXPECT_TRUE(moved.inserts.empty());
  EXPECT_EQ(moved.sources, (std::vector<std::vector<size_t>>{{0, 2}, {1}}));
  const Doc q = *FindDocument(moved.upserts[0].get(), "q");
  // Matches no bucket (each has a count): an insert, or a duplicate _id.
  EXPECT_TRUE(FindDocument(q.get(), "count").has_value());
  EXPECT_TRUE(HoldsObjectId(q, "_id"));
  const Doc u = *FindDocument(moved.upserts[0].get(), "u");
  EXPECT_EQ(FindDocument(u.get(), "$inc")->ToRelaxedJson(), R"({ "count" : 2, "bytes" : 90, "sum.temp" : 42 })");
  EXPECT_EQ(FindBool(moved.upserts[0].get(), "upsert"), true);

  // The same batch under the same token: the same _ids; another token: others.
  MovedBatch again = MovedDocuments(Readings(rules), MigrationDirection::kToRule, Batch(), "run:1");
  MovedBatch other = MovedDocuments(Readings(rules), MigrationDirection::kToRule, Batch(), "run:2");
  EXPECT_EQ(*FindDocument(again.upserts[0].get(), "q"), q);
  EXPECT_EQ(*FindDocument(again.upserts[1].get(), "q"), *FindDocument(moved.upserts[1].get(), "q"));
  EXPECT_FALSE(*FindDocument(other.upserts[0].get(), "q") == q);
  EXPECT_FALSE(*FindDocument(moved.upserts[1].get(), "q") == q);
}

TEST(BucketMigration, ABucketBecomesItsReadingsAgainAsReadsReturnThem) {
  auto rules = ReadingsRule();
  std::vector<Doc> buckets = {
      Json(R"({"_id": {"$oid": "65e1a0000000000000000001"}, "sensor": "a", "start": {"$date": "2026-03-01T10:00:00Z"},
               "m": [{"_id": 1, "at": {"$date": "2026-03-01T10:05:00Z"}, "temp": 20},
                     {"at": {"$date": "2026-03-01T10:07:00Z"}, "temp": 22}],
               "count": 2, "bytes": 80, "sum": {"temp": 42}})"),
      Json(R"({"_id": 7, "sensor": "b", "m": "not readings"})")};
  MovedBatch moved = MovedDocuments(Readings(rules), MigrationDirection::kToFlat, buckets, "run:1");
  ASSERT_EQ(moved.failed.size(), 1u);
  EXPECT_EQ(moved.failed[0].first, 1u);
  ASSERT_EQ(moved.inserts.size(), 2u);
  EXPECT_EQ(moved.inserts[0], Json(R"({"_id": 1, "sensor": "a", "at": {"$date": "2026-03-01T10:05:00Z"}, "temp": 20})"));
  // Without an _id, one derived from the bucket's and the position: the
  // same on every run, so a second run meets it as a duplicate.
  EXPECT_TRUE(HoldsObjectId(moved.inserts[1], "_id"));
  MovedBatch again = MovedDocuments(Readings(rules), MigrationDirection::kToFlat, buckets, "run:9");
  EXPECT_EQ(again.inserts[1], moved.inserts[1]);
  EXPECT_EQ(moved.sources, (std::vector<std::vector<size_t>>{{0}, {0}}));
}

}  // namespace
}  // namespace remold
