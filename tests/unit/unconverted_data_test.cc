// UnconvertedProbes (app/unconverted_data.h): each pattern's filter for the
// documents written before its rule, parsed, and the line that reports them.
#include "app/unconverted_data.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "patterns/attribute/migration.h"
#include "ruleset/loader.h"
#include "tests/unit/rule_texts.h"

namespace remold {
namespace {

std::shared_ptr<const RuleSet> Rules(const std::vector<std::pair<std::string, std::string>>& files) {
  return testing::RulesFromTexts(files);
}

Doc Json(std::string_view json) { return *Doc::FromJson(json); }

// The filter of a probe that is one $match.
Doc Filter(const UnconvertedProbe& probe) {
  EXPECT_EQ(probe.stages.size(), 1u);
  return probe.stages.empty() ? Doc() : *FindDocument(probe.stages[0].get(), "$match");
}

TEST(UnconvertedProbes, OnePerRuleWithAFormToFind) {
  auto rules = Rules({
      {"readings.yaml", "namespace: iot.readings\npattern: bucket\nbucket:\n  collection: readings_buckets\n"
                        "  meta: [sensor]\n  time: at\n  span: 1h\n"},
      {"items.yaml", "namespace: shop.items\npattern: attribute\nattribute:\n  array: specs\n"
                     "  fields: [color, size]\n"},
      {"products.yaml", "namespace: shop.products\npattern: attribute\nattribute:\n  array: props\n"
                        "  except: [name]\n"},
      {"comments.yaml", "namespace: blog.comments\npattern: computed\ncomputed:\n  aggregates:\n"
                        "    - target: posts\n      link: postId\n      fields:\n        commentCount: count\n"},
  });
  std::vector<UnconvertedProbe> probes = UnconvertedProbes(*rules);
  ASSERT_EQ(probes.size(), 4u);
  std::map<std::string, const UnconvertedProbe*> by_rule;
  for (const UnconvertedProbe& probe : probes) by_rule[probe.rule] = &probe;

  EXPECT_EQ(Filter(*by_rule.at("readings")), Json("{}"));
  EXPECT_EQ(by_rule.at("readings")->ns.full(), "iot.readings");
  EXPECT_TRUE(by_rule.at("readings")->decides);
  EXPECT_EQ(Filter(*by_rule.at("items")),
            Json(R"({"$or": [{"color": {"$exists": true}}, {"size": {"$exists": true}}]})"));
  EXPECT_EQ(Filter(*by_rule.at("products")),
            Json(R"({"props": {"$exists": false}, "$expr": {"$gt": [{"$size": {"$filter": {
                       "input": {"$objectToArray": "$$ROOT"},
                       "cond": {"$and": [{"$not": [{"$in": ["$$this.k", ["_id", "name"]]}]},
                                         {"$ne": ["$$this.k", ""]},
                                         {"$not": [{"$and": [{"$gte": ["$$this.k", {"$literal": "$"}]}, {"$lt": ["$$this.k", "%"]}]}]}]}}}}, 0]}})"));
  EXPECT_EQ(DescribeUnconverted(*by_rule.at("readings"), 60),
            "rule 'readings' (bucket, iot.readings): 60 document(s) written before the rule are not in its "
            "form: reads and deletes of iot.readings are refused (117), and inserts go into "
            "iot.readings_buckets, until `remold migrate --rule readings` has moved them there");
  // A computed rule's documents stay as written: what is not in its form
  // is a target without its values, found from the sources.
  const UnconvertedProbe& comments = *by_rule.at("comments");
  EXPECT_TRUE(comments.decides);
  EXPECT_EQ(comments.ns.full(), "blog.comments");
  ASSERT_EQ(comments.stages.size(), 4u);
  EXPECT_EQ(comments.stages[0], Json(R"({"$match": {"postId": {"$exists": true, "$ne": null}}})"));
  EXPECT_EQ(comments.stages[1], Json(R"({"$group": {"_id": "$postId"}})"));
  EXPECT_EQ(comments.stages[2],
            Json(R"({"$lookup": {"from": "posts", "localField": "_id", "foreignField": "_id", "as": "target"}})"));
  EXPECT_EQ(comments.stages[3],
            Json(R"({"$match": {"target.0": {"$exists": true}, "$or": [{"target.commentCount": {"$exists": false}}]}})"));
  EXPECT_EQ(DescribeUnconverted(comments, 3),
            "rule 'comments' (computed, blog.comments): 3 target(s) in blog.posts without the values of their "
            "documents in blog.comments: each write to blog.comments recomputes the values of the targets it "
            "touches from their sources, as `migrating: true` does, until `remold migrate --rule comments` has "
            "filled them");
  EXPECT_NE(DescribeUnconverted(*by_rule.at("readings"), kUnconvertedCountLimit).find("at least 1000000"),
            std::string::npos);
}

TEST(UnconvertedProbes, AMigratingRuleCountsWhatTheMigrationHasLeft) {
  auto rules = Rules({
      {"items.yaml", "namespace: shop.items\npattern: attribute\nattribute:\n  array: specs\n"
                     "  fields: [color]\n  migrating: true\n"},
      {"gone.yaml", "namespace: shop.gone\npattern: attribute\nattribute:\n  array: specs\n"
                    "  fields: [color]\n  migrating: to_flat\n"},
      {"users.yaml", "namespace: app.users\npattern: versioned\nversioned:\n  versions:\n    - version: 1\n"
                     "    - version: 4\n      upgrade: [{remove: a}]\n    - version: 7\n"},
  });
  std::map<std::string, UnconvertedProbe> by_rule;
  for (UnconvertedProbe& probe : UnconvertedProbes(*rules)) by_rule.emplace(probe.rule, std::move(probe));
  ASSERT_EQ(by_rule.size(), 3u);
  // A versioned rule always reads every version: what is left is what is older.
  EXPECT_EQ(Filter(by_rule.at("users")), Json(R"({"schemaVersion": {"$in": [null, 1, 4]}})"));
  EXPECT_EQ(DescribeUnconverted(by_rule.at("users"), 5),
            "rule 'users' (versioned, app.users): 5 document(s) are at an older version: reads upgrade them; "
            "`remold migrate --rule users` converts them");
  EXPECT_EQ(Filter(by_rule.at("items")), Json(R"({"$or": [{"color": {"$exists": true}}]})"));
  EXPECT_FALSE(by_rule.at("items").decides);  // the rule says how it serves
  EXPECT_EQ(DescribeUnconverted(by_rule.at("items"), 3),
            "rule 'items' (attribute, shop.items): 3 document(s) written before the rule are not in its form "
            "yet: the rule is migrating: reads cover both forms; `remold migrate --rule items` converts them");
  EXPECT_EQ(Filter(by_rule.at("gone")), Json(R"({"specs": {"$exists": true}})"));
  EXPECT_EQ(DescribeUnconverted(by_rule.at("gone"), 2),
            "rule 'gone' (attribute, shop.gone): 2 document(s) are still in the rule's form: the rule is "
            "migrating to the flat form: reads cover both forms; `remold migrate --rule gone --to flat` "
            "converts them");
}

// The filters quote the names they hold: a name with a quote or a
// backslash once made a filter that did not parse, and an update on a
// migrating attribute rule's collection crashed remold (found by fuzz_rules).
TEST(UnconvertedProbes, NamesWithQuotesOrBackslashesAreQuoted) {
  auto rules = Rules({
      {"items.yaml", "namespace: shop.items\npattern: attribute\nattribute:\n  array: specs\n"
                     "  fields: ['co\"lor']\n"},
      {"products.yaml", "namespace: shop.products\npattern: attribute\nattribute:\n  array: 'pr\"ops'\n"
                        "  except: ['na\\me']\n"},
      {"users.yaml", "namespace: app.users\npattern: versioned\nversioned:\n  field: 'sche\"ma'\n"
                     "  versions:\n    - version: 1\n    - version: 2\n"},
  });
  std::map<std::string, UnconvertedProbe> by_rule;
  for (UnconvertedProbe& probe : UnconvertedProbes(*rules)) by_rule.emplace(probe.rule, std::move(probe));
  ASSERT_EQ(by_rule.size(), 3u);
  EXPECT_EQ(Filter(by_rule.at("items")), Json(R"({"$or": [{"co\"lor": {"$exists": true}}]})"));
  EXPECT_EQ(Filter(by_rule.at("products")),
            Json(R"({"pr\"ops": {"$exists": false}, "$expr": {"$gt": [{"$size": {"$filter": {
                       "input": {"$objectToArray": "$$ROOT"},
                       "cond": {"$and": [{"$not": [{"$in": ["$$this.k", ["_id", "na\\me"]]}]},
                                         {"$ne": ["$$this.k", ""]},
                                         {"$not": [{"$and": [{"$gte": ["$$this.k", {"$literal": "$"}]}, {"$lt": ["$$this.k", "%"]}]}]}]}}}}, 0]}})"));
  EXPECT_EQ(Filter(by_rule.at("users")), Json(R"({"sche\"ma": {"$in": [null, 1]}})"));
  const AttributeRule& products = std::get<AttributeRule>(rules->Find("shop", "products")->pattern);
  EXPECT_EQ(Json(DocumentsToMigrate(products, MigrationDirection::kToFlat)),
            Json(R"({"pr\"ops": {"$exists": true}})"));
}

TEST(UnconvertedProbes, AfterAReloadOnlyNewOrChangedRules) {
  const std::string bucket = "namespace: iot.readings\npattern: bucket\nbucket:\n  collection: readings_buckets\n"
                             "  meta: [sensor]\n  time: at\n  span: 1h\n";
  // Another storage (a change of Describe()): reported again.
  const std::string moved = "namespace: iot.readings\npattern: bucket\nbucket:\n  collection: readings_by_hour\n"
                            "  meta: [sensor]\n  time: at\n  span: 1h\n";
  const std::string attribute = "namespace: shop.items\npattern: attribute\nattribute:\n  array: specs\n"
                                "  fields: [color]\n";
  auto before = Rules({{"readings.yaml", bucket}});
  EXPECT_TRUE(UnconvertedProbes(*Rules({{"readings.yaml", bucket}}), before.get()).empty());
  std::vector<UnconvertedProbe> added =
      UnconvertedProbes(*Rules({{"readings.yaml", bucket}, {"items.yaml", attribute}}), before.get());
  ASSERT_EQ(added.size(), 1u);
  EXPECT_EQ(added[0].rule, "items");
  std::vector<UnconvertedProbe> changed = UnconvertedProbes(*Rules({{"readings.yaml", moved}}), before.get());
  ASSERT_EQ(changed.size(), 1u);
  EXPECT_EQ(changed[0].rule, "readings");
}

}  // namespace
}  // namespace remold
