// The attribute rules the loader accepts (ruleset/loader.h), checked field by
// field through AttributeRule (ruleset/rule.h). The refused ones are data,
// under loader/attribute/.
#include <gtest/gtest.h>

#include <string>
#include <variant>
#include <vector>

#include "ruleset/loader.h"
#include "tests/golden/temp_dir.h"

namespace remold {
namespace {

// A valid attribute rule with the default names.
const char* kAttribute = R"(namespace: shop.products
pattern: attribute
attribute:
  except: [name, price, category]
)";

TEST(AttributeRuleLoader, DefaultsWithExcept) {
  RuleLoadResult result = LoadRuleText(kAttribute, "products.yaml");
  ASSERT_TRUE(result.errors.empty()) << result.errors.front();
  ASSERT_TRUE(result.rules);
  const Rule* rule = result.rules->Find("shop", "products");
  ASSERT_TRUE(rule);
  EXPECT_EQ(rule->name, "products");
  const auto& a = std::get<AttributeRule>(rule->pattern);
  EXPECT_EQ(a.logical, (Namespace{"shop", "products"}));
  EXPECT_EQ(a.array_field, "specs");
  EXPECT_EQ(a.key_name, "k");
  EXPECT_EQ(a.value_name, "v");
  EXPECT_TRUE(a.fields.empty());
  EXPECT_EQ(a.except, (std::vector<std::string>{"name", "price", "category"}));
  EXPECT_TRUE(a.unfold);
  EXPECT_TRUE(a.fix_elem_match);
  // except mode: everything but _id, the array and the fixed fields.
  EXPECT_TRUE(a.IsAttribute("ram_gb"));
  EXPECT_FALSE(a.IsAttribute("name"));
  EXPECT_FALSE(a.IsAttribute("_id"));
  EXPECT_FALSE(a.IsAttribute("specs"));
  EXPECT_FALSE(a.IsAttribute("$and"));
}

TEST(AttributeRuleLoader, ValidRuleWithEveryOption) {
  TempDir dir;
  std::string source = dir.Write("catalog.yaml", R"(namespace: shop.catalog
pattern: attribute
attribute:
  array: props
  key: name
  value: val
  fields: [ram_gb, screen_in, watts]
  unfold: false
  fix_elem_match: false
)");
  dir.Write("products.yml", kAttribute);
  RuleLoadResult result = LoadRuleDirectory(dir.path().string());
  ASSERT_TRUE(result.errors.empty()) << result.errors.front();
  ASSERT_TRUE(result.rules);
  ASSERT_EQ(result.rules->rules().size(), 2u);
  const Rule* rule = result.rules->Find("shop", "catalog");
  ASSERT_TRUE(rule);
  EXPECT_EQ(rule->name, "catalog");
  EXPECT_EQ(rule->source, source);
  const auto& a = std::get<AttributeRule>(rule->pattern);
  EXPECT_EQ(a.logical, (Namespace{"shop", "catalog"}));
  EXPECT_EQ(a.array_field, "props");
  EXPECT_EQ(a.key_name, "name");
  EXPECT_EQ(a.value_name, "val");
  EXPECT_EQ(a.fields, (std::vector<std::string>{"ram_gb", "screen_in", "watts"}));
  EXPECT_TRUE(a.except.empty());
  EXPECT_FALSE(a.unfold);
  EXPECT_FALSE(a.fix_elem_match);
  // fields mode: only the listed fields.
  EXPECT_TRUE(a.IsAttribute("watts"));
  EXPECT_FALSE(a.IsAttribute("color"));
  EXPECT_FALSE(a.IsAttribute("props"));
  EXPECT_FALSE(a.IsAttribute("_id"));
  ASSERT_TRUE(result.rules->Find("shop", "products"));
  EXPECT_TRUE(std::holds_alternative<AttributeRule>(result.rules->Find("shop", "products")->pattern));
}

TEST(AttributeRuleLoader, ExplicitTrueBooleans) {
  RuleLoadResult result = LoadRuleText(std::string(kAttribute) +
                                           "  unfold: true\n  fix_elem_match: true\n",
                                       "r.yaml");
  ASSERT_TRUE(result.errors.empty()) << result.errors.front();
  const auto& a = std::get<AttributeRule>(result.rules->rules()[0].pattern);
  EXPECT_TRUE(a.unfold);
  EXPECT_TRUE(a.fix_elem_match);
}

}  // namespace
}  // namespace remold
