// Loading rule files: one YAML file per collection in a rules directory.
//
// Every key and type is checked. A mistake is reported as
//   FILE:LINE: what is wrong, what was expected
// and a directory with any mistake yields no RuleSet at all (the caller
// keeps the rules it had).
//
// A file names one pattern and has its section:
//   namespace: shop.products
//   pattern: attribute
//   attribute: {...}
// or stacks two on its collection, top first, with both sections:
//   pattern: [versioned, attribute]
// The upper rule's plans run through the lower rule (rewrite/stacked_plan.h);
// a stack whose rules cannot compose (patterns/pattern.h) is refused.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ruleset/rule_set.h"

namespace remold {

struct RuleLoadResult {
  std::shared_ptr<const RuleSet> rules;  // null when errors is not empty
  std::vector<std::string> errors;
};

// Loads every *.yaml / *.yml file of `directory` (not recursive).
RuleLoadResult LoadRuleDirectory(const std::string& directory);

// Loads one rule from YAML text; `source` names it in messages.
RuleLoadResult LoadRuleText(const std::string& text, const std::string& source);

// Loads rule files given as text, in this order, as a directory holding
// them loads (what tests and the fuzz target of the loader use).
struct RuleFileText {
  std::string source;  // names the file in messages; its stem names the rule
  std::string text;
};
RuleLoadResult LoadRuleTexts(const std::vector<RuleFileText>& files);

}  // namespace remold
