// The pure pieces of `remold reconcile`: value comparison, expectations,
// repairs, report lines, pipelines and the backend URI.
#include <gtest/gtest.h>

#include "patterns/computed/reconcile_expected.h"
#include "patterns/reconcile/drift.h"
#include "patterns/reconcile/value.h"
#include "ruleset/loader.h"
#include "tools/common/backend_client.h"

namespace remold {
namespace {

Doc Json(const std::string& json) {
  std::string error;
  std::optional<Doc> doc = Doc::FromJson(json, &error);
  EXPECT_TRUE(doc) << error << ": " << json;
  return doc ? *doc : Doc();
}

// The value of the only field of `json`.
Value V(const std::string& json) {
  Doc doc = Json(R"({"v": )" + json + "}");
  return Value::Of(*Find(doc.get(), "v"));
}

bool StoredHolds(const std::string& stored_json, const Value& expected) {
  Doc doc = Json(R"({"v": )" + stored_json + "}");
  std::optional<bson_iter_t> stored = Find(doc.get(), "v");
  return Holds(&*stored, expected);
}

Expectation Expect(std::string field, std::vector<Value> accepted, bool missing_ok = false,
                   std::string error = "") {
  Expectation expectation;
  expectation.field = std::move(field);
  expectation.accepted = std::move(accepted);
  expectation.missing_ok = missing_ok;
  expectation.error = std::move(error);
  return expectation;
}

std::string DescribeJson(const std::string& json) { return Describe(V(json)); }

const ComputedRule& LoadComputed(const std::string& yaml, std::shared_ptr<const RuleSet>& keep) {
  RuleLoadResult result = LoadRuleText(yaml, "rule.yaml");
  EXPECT_TRUE(result.errors.empty()) << (result.errors.empty() ? "" : result.errors[0]);
  keep = result.rules;
  return std::get<ComputedRule>(keep->rules().at(0).pattern);
}

constexpr const char* kComments = R"(
namespace: blog.comments
pattern: computed
computed:
  aggregates:
    - target: posts
      link: {from: postId, to: _id}
      fields:
        commentCount: count
        starSum: {sum: stars}
        lastCommentAt: {max: createdAt}
        lastCommentBy: {latest: author, by: createdAt}
      derived:
        avgStars: {divide: [starSum, commentCount]}
)";

// ---- values

TEST(ReconcileValueTest, NumbersHoldAcrossTypes) {
  EXPECT_TRUE(StoredHolds("7", V(R"({"$numberLong": "7"})")));
  EXPECT_TRUE(StoredHolds("7.0", V("7")));
  EXPECT_FALSE(StoredHolds("8", V("7")));
  EXPECT_FALSE(StoredHolds(R"("7")", V("7")));
}

TEST(ReconcileValueTest, NullExpectsAbsent) {
  EXPECT_TRUE(Holds(nullptr, Value()));
  EXPECT_TRUE(StoredHolds("null", Value()));
  EXPECT_FALSE(StoredHolds("0", Value()));
  EXPECT_FALSE(Holds(nullptr, V("0")));
}

TEST(ReconcileValueTest, OtherTypesHoldExactly) {
  const std::string oid = R"({"$oid": "650000000000000000000001"})";
  EXPECT_TRUE(StoredHolds(oid, V(oid)));
  EXPECT_FALSE(StoredHolds(R"({"$oid": "650000000000000000000002"})", V(oid)));
  EXPECT_TRUE(StoredHolds(R"({"$date": "2026-01-02T00:00:00Z"})", V(R"({"$date": "2026-01-02T00:00:00Z"})")));
}

TEST(ReconcileValueTest, Describe) {
  EXPECT_EQ(Describe(nullptr), "missing");
  EXPECT_EQ(DescribeJson("null"), "null");
  EXPECT_EQ(DescribeJson("7"), "7");
  EXPECT_EQ(DescribeJson("4.5"), "4.5");
  EXPECT_EQ(DescribeJson("4.0"), "4.0");
  EXPECT_EQ(DescribeJson(R"("a \"b\"")"), R"("a \"b\"")");
  EXPECT_EQ(DescribeJson("true"), "true");
  EXPECT_EQ(DescribeJson(R"({"$date": "2026-01-02T03:04:05.678Z"})"), "2026-01-02T03:04:05.678Z");
  EXPECT_EQ(DescribeJson(R"({"$date": {"$numberLong": "-1"}})"), "1969-12-31T23:59:59.999Z");
  EXPECT_EQ(DescribeJson(R"({"$oid": "650000000000000000000001"})"), R"({ "$oid" : "650000000000000000000001" })");
}

TEST(ReconcileValueTest, Difference) {
  Doc doc = Json(R"({"five": 5, "half": 2.5, "text": "x"})");
  std::optional<bson_iter_t> five = Find(doc.get(), "five"), half = Find(doc.get(), "half"),
                             text = Find(doc.get(), "text");
  EXPECT_EQ(Difference(&*five, V("7")), "-2");
  EXPECT_EQ(Difference(&*five, V("3")), "+2");
  EXPECT_EQ(Difference(&*half, V("3")), "-0.5");
  EXPECT_EQ(Difference(&*half, V("2.2")), "+0.3");
  EXPECT_EQ(Difference(&*text, V("3")), std::nullopt);
  EXPECT_EQ(Difference(nullptr, V("3")), std::nullopt);
}

TEST(ReconcileValueTest, LinkKeysGroupAsMongoDBDoes) {
  auto key = [](const std::string& json) {
    Value value = V(json);
    bson_iter_t iter = value.iter();
    return LinkKey(iter);
  };
  EXPECT_EQ(key("1"), key(R"({"$numberLong": "1"})"));
  EXPECT_EQ(key("1"), key("1.0"));
  EXPECT_NE(key("1"), key("1.5"));
  EXPECT_NE(key("1"), key(R"("1")"));
  EXPECT_EQ(key(R"({"$oid": "650000000000000000000001"})"), key(R"({"$oid": "650000000000000000000001"})"));
}

// ---- comparing and repairing

TEST(ReconcileDriftTest, CompareReportsOnlyDriftedFields) {
  Doc target = Json(R"({"_id": 1, "commentCount": 5, "lastCommentAt": null})");
  std::vector<Expectation> expectations = {Expect("commentCount", {V("7")}), Expect("lastCommentAt", {Value()}),
                                           Expect("starSum", {V("0")}, /*missing_ok=*/true)};
  std::vector<FieldDrift> drifts = Compare(target.get(), expectations);
  ASSERT_EQ(drifts.size(), 1u);
  EXPECT_EQ(drifts[0].field, "commentCount");
  EXPECT_EQ(Describe(*drifts[0].observed), "5");
  EXPECT_EQ(Describe(drifts[0].expected), "7");
}

TEST(ReconcileDriftTest, AnyAcceptedValueHolds) {
  Doc target = Json(R"({"by": "c"})");
  std::vector<Expectation> tie = {Expect("by", {V(R"("b")"), V(R"("c")")})};
  EXPECT_TRUE(Compare(target.get(), tie).empty());
  std::vector<Expectation> other = {Expect("by", {V(R"("a")")})};
  EXPECT_EQ(Compare(target.get(), other).size(), 1u);
}

TEST(ReconcileDriftTest, ErrorsAreAlwaysDrift) {
  Doc target = Json(R"({"total": 3})");
  Expectation failing = Expect("total", {}, false, "'price' is a string, expected a number");
  std::vector<FieldDrift> drifts = Compare(target.get(), {failing});
  ASSERT_EQ(drifts.size(), 1u);
  EXPECT_EQ(drifts[0].error, failing.error);
}

TEST(ReconcileDriftTest, GuardedRepair) {
  Doc target = Json(R"({"_id": 1, "commentCount": 5})");
  std::vector<Expectation> expectations = {Expect("commentCount", {V("7")}), Expect("lastCommentAt", {Value()}),
                                           Expect("lastCommentBy", {Value()})};
  Doc stale = Json(R"({"_id": 1, "commentCount": 5, "lastCommentBy": "x"})");
  std::vector<FieldDrift> drifts = Compare(stale.get(), expectations);
  Doc filter = GuardedFilter(IdentityOf(stale.get()), DriftGuards(drifts));
  EXPECT_EQ(filter, Json(R"({"_id": 1, "commentCount": {"$eq": 5}, "lastCommentBy": {"$eq": "x"}})"));
  EXPECT_EQ(RepairUpdate(drifts), Json(R"({"$set": {"commentCount": 7}, "$unset": {"lastCommentBy": ""}})"));

  std::vector<FieldDrift> missing = Compare(Json(R"({"_id": 2})").get(), {Expect("commentCount", {V("7")})});
  EXPECT_EQ(GuardedFilter(Json(R"({"_id": 2})"), DriftGuards(missing)),
            Json(R"({"_id": 2, "commentCount": {"$exists": false}})"));
}

TEST(ReconcileDriftTest, DriftLines) {
  Doc target = Json(R"({"_id": 1, "commentCount": 5, "lastCommentAt": {"$date": "2026-01-01T00:00:00Z"}})");
  std::vector<Expectation> expectations = {Expect("commentCount", {V("7")}),
                                           Expect("lastCommentAt", {V(R"({"$date": "2026-01-02T00:00:00Z"})")})};
  DocumentDrift drift;
  drift.ns = "blog.posts";
  drift.identity = IdentityOf(target.get()).ToRelaxedJson();
  drift.fields = Compare(target.get(), expectations);
  EXPECT_EQ(FormatDrift(drift),
            R"(blog.posts { "_id" : 1 }: commentCount 5, expected 7 (off by -2); )"
            "lastCommentAt 2026-01-01T00:00:00.000Z, expected 2026-01-02T00:00:00.000Z");
  drift.outcome = FixOutcome::kFixed;
  EXPECT_TRUE(FormatDrift(drift).ends_with(" => fixed"));
  drift.outcome = FixOutcome::kChanged;
  EXPECT_TRUE(FormatDrift(drift).ends_with(" => not fixed: changed while reconciling; run again"));
  drift.outcome = FixOutcome::kFailed;
  drift.failure = "E11000";
  EXPECT_TRUE(FormatDrift(drift).ends_with(" => not fixed: E11000"));
}

TEST(ReconcileDriftTest, MissingTargetAndCannotComputeLines) {
  DocumentDrift missing;
  missing.ns = "blog.movies";
  missing.identity = R"({ "_id" : "m2" })";
  missing.target_missing = true;
  missing.fields = Compare(Doc().get(), {Expect("ratingCount", {V("1")}), Expect("best", {Value()})});
  EXPECT_EQ(FormatDrift(missing), R"(blog.movies { "_id" : "m2" }: target missing, expected ratingCount 1)");

  DocumentDrift failing;
  failing.ns = "shop.orders";
  failing.identity = R"({ "_id" : 4 })";
  failing.fields = Compare(Json(R"({"total": 3})").get(), {Expect("total", {}, false, "'price' is a string")});
  EXPECT_EQ(FormatDrift(failing), R"(shop.orders { "_id" : 4 }: total 3, cannot compute: 'price' is a string)");
}

TEST(ReconcileDriftTest, Summaries) {
  Summary summary{"comments", "blog.posts", 120, 3, 2, 5};
  EXPECT_EQ(FormatSummary(summary), "rule comments: blog.posts: 120 checked, 3 drifted, 2 fixed, 5 orphan links");
  summary.orphan_links.reset();
  EXPECT_EQ(FormatSummary(summary), "rule comments: blog.posts: 120 checked, 3 drifted, 2 fixed");
  EXPECT_EQ(FormatTotal(5, 3), "total: 5 drifted, 3 fixed, 2 not fixed");
}

// ---- expectations from the sources

TEST(ReconcileExpectedTest, Pipelines) {
  std::shared_ptr<const RuleSet> keep;
  const ComputedAggregate& aggregate = LoadComputed(kComments, keep).aggregates.at(0);
  EXPECT_EQ(GroupPipeline(aggregate, nullptr), Json(R"({"pipeline": [
      {"$match": {"postId": {"$exists": true, "$ne": null}}},
      {"$group": {"_id": "$postId", "commentCount": {"$sum": 1}, "starSum": {"$sum": "$stars"},
                  "lastCommentAt": {"$max": "$createdAt"}}}]})"));
  std::vector<Value> links = {V("1"), V("2")};
  EXPECT_EQ(LatestOrders(aggregate), std::vector<std::string>{"createdAt"});
  EXPECT_EQ(LatestPipeline(aggregate, "createdAt", &links), Json(R"({"pipeline": [
      {"$match": {"postId": {"$in": [1, 2]}}},
      {"$sort": {"createdAt": -1}},
      {"$group": {"_id": "$postId", "lastCommentBy": {"$first": "$author"}}}]})"));
}

TEST(ReconcileExpectedTest, TargetWithSources) {
  std::shared_ptr<const RuleSet> keep;
  const ComputedAggregate& aggregate = LoadComputed(kComments, keep).aggregates.at(0);
  LinkSources sources;
  AppendGroupValues(sources.values, Json(R"({"_id": 1, "commentCount": 4, "starSum": 10,
      "lastCommentAt": {"$date": "2026-01-02T00:00:00Z"}, "lastCommentBy": "b"})").get());
  Doc target = Json(R"({"_id": 1, "commentCount": 4, "starSum": 10, "avgStars": 2.5,
      "lastCommentAt": {"$date": "2026-01-02T00:00:00Z"}, "lastCommentBy": "b"})");
  EXPECT_TRUE(Compare(target.get(), AggregateExpectations(aggregate, &sources, nullptr, target.get())).empty());

  Doc wrong = Json(R"({"_id": 1, "commentCount": 3, "starSum": 10, "avgStars": 2.5,
      "lastCommentAt": {"$date": "2026-01-02T00:00:00Z"}, "lastCommentBy": "c"})");
  std::vector<FieldDrift> drifts =
      Compare(wrong.get(), AggregateExpectations(aggregate, &sources, nullptr, wrong.get()));
  ASSERT_EQ(drifts.size(), 2u);
  EXPECT_EQ(drifts[0].field, "commentCount");
  EXPECT_EQ(drifts[1].field, "lastCommentBy");

  // "c" tied with "b" for the latest createdAt: accepted.
  LatestChoices ties = {{"lastCommentBy", {V(R"("b")"), V(R"("c")")}}};
  drifts = Compare(wrong.get(), AggregateExpectations(aggregate, &sources, &ties, wrong.get()));
  ASSERT_EQ(drifts.size(), 1u);
  EXPECT_EQ(drifts[0].field, "commentCount");
}

TEST(ReconcileExpectedTest, DerivedFieldsComeFromExpectedValues) {
  std::shared_ptr<const RuleSet> keep;
  const ComputedAggregate& aggregate = LoadComputed(kComments, keep).aggregates.at(0);
  LinkSources sources;
  AppendGroupValues(sources.values, Json(R"({"_id": 1, "commentCount": 4, "starSum": 10,
      "lastCommentAt": null})").get());
  Doc target = Json(R"({"_id": 1, "commentCount": 2, "starSum": 10, "avgStars": 5.0})");
  std::vector<FieldDrift> drifts =
      Compare(target.get(), AggregateExpectations(aggregate, &sources, nullptr, target.get()));
  ASSERT_EQ(drifts.size(), 2u);
  EXPECT_EQ(drifts[1].field, "avgStars");
  EXPECT_EQ(Describe(drifts[1].expected), "2.5");
}

TEST(ReconcileExpectedTest, TargetWithoutSources) {
  std::shared_ptr<const RuleSet> keep;
  const ComputedAggregate& aggregate = LoadComputed(kComments, keep).aggregates.at(0);
  Doc untouched = Json(R"({"_id": 9})");
  EXPECT_TRUE(Compare(untouched.get(), AggregateExpectations(aggregate, nullptr, nullptr, untouched.get())).empty());
  Doc zeroed = Json(R"({"_id": 9, "commentCount": 0, "starSum": 0})");
  EXPECT_TRUE(Compare(zeroed.get(), AggregateExpectations(aggregate, nullptr, nullptr, zeroed.get())).empty());
  Doc stale = Json(R"({"_id": 9, "commentCount": 2, "lastCommentBy": "a"})");
  std::vector<FieldDrift> drifts =
      Compare(stale.get(), AggregateExpectations(aggregate, nullptr, nullptr, stale.get()));
  ASSERT_EQ(drifts.size(), 2u);
  EXPECT_EQ(Describe(drifts[0].expected), "0");
  EXPECT_TRUE(drifts[1].expected.is_null());
}

TEST(ReconcileExpectedTest, LatestChoicesAreTheSourcesAtTheGreatestBy) {
  std::shared_ptr<const RuleSet> keep;
  const ComputedAggregate& aggregate = LoadComputed(kComments, keep).aggregates.at(0);
  Doc values = Json(R"({"lastCommentAt": {"$date": "2026-01-02T00:00:00Z"}})");
  LatestChoices choices;
  for (const char* source : {R"({"createdAt": {"$date": "2026-01-02T00:00:00Z"}, "author": "b"})",
                             R"({"createdAt": {"$date": "2026-01-01T00:00:00Z"}, "author": "a"})",
                             R"({"createdAt": {"$date": "2026-01-02T00:00:00Z"}, "author": "c"})",
                             R"({"createdAt": {"$date": "2026-01-02T00:00:00Z"}, "author": "b"})"})
    CollectLatestChoice(aggregate, values.get(), Json(source).get(), choices);
  ASSERT_EQ(choices["lastCommentBy"].size(), 2u);
  EXPECT_EQ(Describe(choices["lastCommentBy"][0]), "\"b\"");
  EXPECT_EQ(Describe(choices["lastCommentBy"][1]), "\"c\"");
}

TEST(ReconcileExpectedTest, SameDocumentFields) {
  std::shared_ptr<const RuleSet> keep;
  const ComputedRule& rule = LoadComputed(R"(
namespace: shop.orders
pattern: computed
computed:
  fields:
    total: {sum: {each: items, of: {product: [price, qty]}}}
)", keep);
  Doc right = Json(R"({"_id": 1, "items": [{"price": 2, "qty": 3}, {"price": 1.5, "qty": 2}], "total": 9})");
  EXPECT_TRUE(Compare(right.get(), FieldExpectations(rule.fields, right.get())).empty());
  Doc wrong = Json(R"({"_id": 2, "items": [{"price": 2, "qty": 3}], "total": 5})");
  std::vector<FieldDrift> drifts = Compare(wrong.get(), FieldExpectations(rule.fields, wrong.get()));
  ASSERT_EQ(drifts.size(), 1u);
  EXPECT_EQ(Describe(drifts[0].expected), "6");
  Doc bad = Json(R"({"_id": 3, "items": [{"price": "x", "qty": 3}]})");
  drifts = Compare(bad.get(), FieldExpectations(rule.fields, bad.get()));
  ASSERT_EQ(drifts.size(), 1u);
  EXPECT_FALSE(drifts[0].error.empty());
}

}  // namespace
}  // namespace remold
