// RuleChangeWarnings (app/rule_reloader.h): what a reload says about the
// data of the rules it drops, adds or changes.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "app/rule_reloader.h"
#include "ruleset/loader.h"
#include "tests/unit/rule_texts.h"

namespace remold {
namespace {

const char* kBucket = R"(namespace: iot.readings
pattern: bucket
bucket:
  collection: readings_buckets
  meta: [sensor]
  time: at
  span: 1h
)";

const char* kAttribute = R"(namespace: shop.products
pattern: attribute
attribute:
  array: props
  except: [name]
)";

const char* kComputed = R"(namespace: blog.comments
pattern: computed
computed:
  aggregates:
    - target: posts
      link: postId
      fields:
        commentCount: count
)";

std::shared_ptr<const RuleSet> Rules(const std::vector<std::pair<std::string, std::string>>& files) {
  return testing::RulesFromTexts(files);
}

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(RuleChangeWarnings, NothingWhenNothingChanges) {
  auto rules = Rules({{"readings.yaml", kBucket}, {"products.yaml", kAttribute}});
  EXPECT_TRUE(RuleChangeWarnings(*rules, *Rules({{"readings.yaml", kBucket},
                                                 {"products.yaml", kAttribute}}))
                  .empty());
}

TEST(RuleChangeWarnings, BucketRuleRemoved) {
  auto warnings = RuleChangeWarnings(*Rules({{"readings.yaml", kBucket}}), RuleSet());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0],
            "rule 'readings' (bucket, iot.readings) removed: the readings stay in the bucket "
            "collection iot.readings_buckets, and reads of iot.readings no longer return them "
            "until the rule is back (or the readings are moved back to iot.readings: `remold migrate --to flat`)");
}

TEST(RuleChangeWarnings, AttributeRuleRemoved) {
  auto warnings = RuleChangeWarnings(*Rules({{"products.yaml", kAttribute}}), RuleSet());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0],
            "rule 'products' (attribute, shop.products) removed: the documents stay as stored: "
            "reads of shop.products return the attributes as the array 'props' of {k, v} pairs, "
            "and queries naming an attribute no longer match them, until the rule is back");
}

TEST(RuleChangeWarnings, ComputedRuleRemoved) {
  auto warnings = RuleChangeWarnings(*Rules({{"comments.yaml", kComputed}}), RuleSet());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0],
            "rule 'comments' (computed, blog.comments) removed: the maintained fields of "
            "blog.posts are no longer maintained; once the rule is back, run `remold reconcile` "
            "to repair them");
}

TEST(RuleChangeWarnings, RuleAddedSaysExistingDataIsNotConverted) {
  auto warnings = RuleChangeWarnings(*Rules({{"products.yaml", kAttribute}}),
                                     *Rules({{"products.yaml", kAttribute},
                                             {"readings.yaml", kBucket},
                                             {"comments.yaml", kComputed}}));
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_TRUE(Has(warnings[0], "rule 'readings' (bucket, iot.readings) added: documents already "
                               "in iot.readings are not converted"))
      << warnings[0];
  EXPECT_TRUE(Has(warnings[1], "rule 'comments' (computed, blog.comments) added: ")) << warnings[1];
  EXPECT_TRUE(Has(warnings[1], "remold reconcile")) << warnings[1];
}

TEST(RuleChangeWarnings, RuleMovedToAnotherNamespaceIsARemovalAndAnAddition) {
  std::string moved = kBucket;
  moved.replace(moved.find("iot.readings"), 12, "iot.elsewhere");
  auto warnings = RuleChangeWarnings(*Rules({{"readings.yaml", kBucket}}),
                                     *Rules({{"readings.yaml", moved}}));
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_TRUE(Has(warnings[0], "rule 'readings' (bucket, iot.readings) removed: ")) << warnings[0];
  EXPECT_TRUE(Has(warnings[1], "rule 'readings' (bucket, iot.elsewhere) added: ")) << warnings[1];
}

TEST(RuleChangeWarnings, OtherPatternOnTheSameCollectionIsARemovalAndAnAddition) {
  std::string attribute = kAttribute;
  attribute.replace(attribute.find("shop.products"), 13, "iot.readings");
  auto warnings = RuleChangeWarnings(*Rules({{"readings.yaml", kBucket}}),
                                     *Rules({{"readings.yaml", attribute}}));
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_TRUE(Has(warnings[0], "(bucket, iot.readings) removed: the readings stay in"))
      << warnings[0];
  EXPECT_TRUE(Has(warnings[1], "(attribute, iot.readings) added: documents already in"))
      << warnings[1];
}

TEST(RuleChangeWarnings, ChangedStorageIsNamed) {
  std::string renamed = kBucket;
  renamed.replace(renamed.find("readings_buckets"), 16, "readings_b2");
  auto warnings = RuleChangeWarnings(*Rules({{"readings.yaml", kBucket}}),
                                     *Rules({{"readings.yaml", renamed}}));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0],
            "rule 'readings' (bucket, iot.readings) changed from 'iot.readings -> "
            "iot.readings_buckets' to 'iot.readings -> iot.readings_b2': data stored under the "
            "old form is not converted");
}

}  // namespace
}  // namespace remold
