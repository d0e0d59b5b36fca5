// ServingRules (app/adoption.h): a rule whose file says no `migrating`
// serves as its pattern's WhileUnconverted says until its count has found
// nothing written before it; a rule that says `migrating` (true or false)
// serves as it says.
#include "app/adoption.h"

#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>

#include "tests/unit/rule_texts.h"

namespace remold {
namespace {

std::shared_ptr<const RuleSet> Rules(const std::vector<std::pair<std::string, std::string>>& files) {
  return testing::RulesFromTexts(files);
}

const std::string kAttribute =
    "namespace: shop.items\npattern: attribute\nattribute:\n  array: specs\n  fields: [color]\n";
const std::string kBucket =
    "namespace: iot.readings\npattern: bucket\nbucket:\n  collection: readings_buckets\n  meta: [sensor]\n"
    "  time: at\n  span: 1h\n";
const std::string kCounts =
    "namespace: blog.comments\npattern: computed\ncomputed:\n  aggregates:\n    - target: posts\n"
    "      link: postId\n      fields:\n        commentCount: count\n";
const std::string kLatest =
    "namespace: blog.replies\npattern: computed\ncomputed:\n  aggregates:\n    - target: threads\n"
    "      link: threadId\n      fields:\n        lastAt: {max: at}\n        lastBy: {latest: author, by: at}\n";

template <typename R>
const R& Layer(const RuleSet& rules, const std::string& db, const std::string& collection, size_t layer = 0) {
  return std::get<R>(*rules.Find(db, collection)->layers()[layer]);
}

TEST(ServingRules, UncountedRulesServeAsWhileDataWrittenBeforeThemRemains) {
  auto loaded = Rules({{"items.yaml", kAttribute}, {"readings.yaml", kBucket}, {"comments.yaml", kCounts},
                       {"replies.yaml", kLatest}});
  RuleSet serving = ServingRules(*loaded, {});
  EXPECT_EQ(Layer<AttributeRule>(serving, "shop", "items").migrating, MigrationDirection::kToRule);
  EXPECT_TRUE(Layer<BucketRule>(serving, "iot", "readings").flat_readings_left);
  EXPECT_TRUE(Layer<ComputedRule>(serving, "blog", "comments").migrating);
  EXPECT_TRUE(Layer<ComputedRule>(serving, "blog", "comments").aggregates[0].migrating);
  EXPECT_FALSE(Layer<ComputedRule>(serving, "blog", "comments").unfilled_values_left);
  // `latest` cannot be recomputed on write: the source's writes are refused.
  EXPECT_FALSE(Layer<ComputedRule>(serving, "blog", "replies").migrating);
  EXPECT_TRUE(Layer<ComputedRule>(serving, "blog", "replies").unfilled_values_left);
}

TEST(ServingRules, CountedInFormServeTheirOwnFormAlone) {
  auto loaded = Rules({{"items.yaml", kAttribute}, {"readings.yaml", kBucket}, {"comments.yaml", kCounts}});
  std::set<std::string> in_form;
  for (const Rule& rule : loaded->rules()) in_form.insert(LayerKey(rule, 0));
  RuleSet serving = ServingRules(*loaded, in_form);
  EXPECT_FALSE(Layer<AttributeRule>(serving, "shop", "items").migrating.has_value());
  EXPECT_FALSE(Layer<BucketRule>(serving, "iot", "readings").flat_readings_left);
  EXPECT_FALSE(Layer<ComputedRule>(serving, "blog", "comments").migrating);
}

TEST(ServingRules, WhatTheRuleFileSaysWins) {
  auto loaded = Rules({{"items.yaml", kAttribute + "  migrating: false\n"},
                       {"gone.yaml", "namespace: shop.gone\npattern: attribute\nattribute:\n  fields: [color]\n"
                                     "  migrating: to_flat\n"},
                       {"readings.yaml", kBucket + "  migrating: false\n"},
                       {"comments.yaml", kCounts + "  migrating: false\n"}});
  RuleSet serving = ServingRules(*loaded, {});
  EXPECT_FALSE(Layer<AttributeRule>(serving, "shop", "items").migrating.has_value());
  EXPECT_EQ(Layer<AttributeRule>(serving, "shop", "gone").migrating, MigrationDirection::kToFlat);
  EXPECT_FALSE(Layer<BucketRule>(serving, "iot", "readings").flat_readings_left);
  EXPECT_FALSE(Layer<ComputedRule>(serving, "blog", "comments").migrating);
}

TEST(ServingRules, AStackAdoptsLayerByLayer) {
  auto loaded = Rules({{"users.yaml",
                        "namespace: app.users\npattern: [versioned, attribute]\nversioned:\n  versions:\n"
                        "    - version: 1\n    - version: 2\nattribute:\n  except: [name, schemaVersion]\n"}});
  const Rule& rule = *loaded->Find("app", "users");
  RuleSet serving = ServingRules(*loaded, {});
  EXPECT_EQ(Layer<AttributeRule>(serving, "app", "users", 1).migrating, MigrationDirection::kToRule);
  RuleSet counted = ServingRules(*loaded, {LayerKey(rule, 1)});
  EXPECT_FALSE(Layer<AttributeRule>(counted, "app", "users", 1).migrating.has_value());
}

}  // namespace
}  // namespace remold
