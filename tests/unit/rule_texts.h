// One RuleSet from rule file texts, for unit tests of what is said about
// rules (reload warnings, data written before a rule).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ruleset/loader.h"

namespace remold::testing {

// The rules of `files` ({source, text}), as one set; a file that does not
// load fails the test.
inline std::shared_ptr<const RuleSet> RulesFromTexts(
    const std::vector<std::pair<std::string, std::string>>& files) {
  std::vector<Rule> rules;
  for (const auto& [source, text] : files) {
    RuleLoadResult result = LoadRuleText(text, source);
    EXPECT_TRUE(result.errors.empty()) << result.errors.front();
    for (const Rule& rule : result.rules->rules()) rules.push_back(rule);
  }
  return std::make_shared<const RuleSet>(std::move(rules));
}

// shop.products under an attribute rule: every field but _id, the pair
// array `specs` (the default) and `name` is an attribute.
inline const AttributeRule& ShopProductsAttributeRule() {
  static const std::shared_ptr<const RuleSet> rules = RulesFromTexts(
      {{"products.yaml", "namespace: shop.products\npattern: attribute\nattribute:\n  except: [name]\n"}});
  return std::get<AttributeRule>(rules->Find("shop", "products")->pattern);
}

}  // namespace remold::testing
