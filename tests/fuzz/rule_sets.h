// The rule sets fuzz_rewrite chooses from: the golden cases' rules, one
// folder per distinct rule (or rules directory), listed in
// tests/fuzz/rewrite_rule_sets.txt, one path under tests/golden/cases per
// line ('#' starts a comment). An input's first byte is an index into the
// list, so the list is append only: the corpus holds those indexes.
// A folder is loaded as the golden tests load it (rule.yaml with
// LoadRuleText, or rules/ with LoadRuleDirectory).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ruleset/rule_set.h"

namespace remold::fuzz {

struct RuleSetEntry {
  std::string folder;  // as listed
  std::shared_ptr<const RuleSet> rules;
  // The rule files' text: rule.yaml's, or, for rules/, that of its only
  // file, or each file's name and text (to match a golden case to an entry).
  std::string key;
};

// Every entry of `list_file`, with folders under `cases_dir`; a folder
// whose rules do not load ends the process with a message naming it.
std::vector<RuleSetEntry> LoadRuleSets(const std::string& list_file, const std::string& cases_dir);

// The key (as RuleSetEntry::key) of a golden case folder; empty when it has
// neither rule.yaml nor rules/.
std::string RuleSetKey(const std::string& folder);

}  // namespace remold::fuzz
