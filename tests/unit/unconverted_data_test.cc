// UnconvertedProbes (app/unconverted_data.h): each pattern's filter for the
// documents written before its rule, parsed, and the line that reports them.
#include "app/unconverted_data.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "patterns/attribute/migration.h"
#include "rules/loader.h"
#include "tests/unit/rule_texts.h"

namespace remold {
namespace {

std::shared_ptr<const RuleSet> Rules(const std::vector<std::pair<std::string, std::string>>& files) {
  return testing::RulesFromTexts(files);
}

Doc Json(std::string_view json) { return *Doc::FromJson(json); }

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
  ASSERT_EQ(probes.size(), 3u);  // the computed rule stores documents as written
  std::map<std::string, const UnconvertedProbe*> by_rule;
  for (const UnconvertedProbe& probe : probes) by_rule[probe.rule] = &probe;

  EXPECT_EQ(by_rule.at("readings")->filter, Json("{}"));
  EXPECT_EQ(by_rule.at("readings")->logical.full(), "iot.readings");
  EXPECT_EQ(by_rule.at("items")->filter,
            Json(R"({"$or": [{"color": {"$exists": true}}, {"size": {"$exists": true}}]})"));
  EXPECT_EQ(by_rule.at("products")->filter,
            Json(R"({"props": {"$exists": false}, "$expr": {"$gt": [{"$size": {"$filter": {
                       "input": {"$objectToArray": "$$ROOT"},
                       "cond": {"$and": [{"$not": [{"$in": ["$$this.k", ["_id", "name"]]}]},
                                         {"$ne": ["$$this.k", ""]},
                                         {"$not": [{"$and": [{"$gte": ["$$this.k", {"$literal": "$"}]}, {"$lt": ["$$this.k", "%"]}]}]}]}}}}, 0]}})"));
  EXPECT_EQ(DescribeUnconverted(*by_rule.at("readings"), 60).substr(0, 104),
            "rule 'readings' (bucket, iot.readings): 60 document(s) written before the rule are not in its "
            "form: docu");
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
  EXPECT_EQ(by_rule.at("users").filter, Json(R"({"schemaVersion": {"$in": [null, 1, 4]}})"));
  EXPECT_EQ(DescribeUnconverted(by_rule.at("users"), 5),
            "rule 'users' (versioned, app.users): 5 document(s) are at an older version: reads upgrade them; "
            "`remold migrate --rule users` converts them");
  EXPECT_EQ(by_rule.at("items").filter, Json(R"({"$or": [{"color": {"$exists": true}}]})"));
  EXPECT_EQ(DescribeUnconverted(by_rule.at("items"), 3),
            "rule 'items' (attribute, shop.items): 3 document(s) written before the rule are not in its form "
            "yet: the rule is migrating: reads cover both forms; `remold migrate --rule items` converts them");
  EXPECT_EQ(by_rule.at("gone").filter, Json(R"({"specs": {"$exists": true}})"));
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
  EXPECT_EQ(by_rule.at("items").filter, Json(R"({"$or": [{"co\"lor": {"$exists": true}}]})"));
  EXPECT_EQ(by_rule.at("products").filter,
            Json(R"({"pr\"ops": {"$exists": false}, "$expr": {"$gt": [{"$size": {"$filter": {
                       "input": {"$objectToArray": "$$ROOT"},
                       "cond": {"$and": [{"$not": [{"$in": ["$$this.k", ["_id", "na\\me"]]}]},
                                         {"$ne": ["$$this.k", ""]},
                                         {"$not": [{"$and": [{"$gte": ["$$this.k", {"$literal": "$"}]}, {"$lt": ["$$this.k", "%"]}]}]}]}}}}, 0]}})"));
  EXPECT_EQ(by_rule.at("users").filter, Json(R"({"sche\"ma": {"$in": [null, 1]}})"));
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
