// What a pattern sees of the rule file its rule comes from, besides its own
// rule: the file's name (for messages), whether the file stacks two
// patterns, and the collections it shares with other rules. A Rule
// (ruleset/rule.h) is one, so the engine passes it as it is; a pattern never
// sees the other layers of a stack or the other rules.
#pragma once

#include <string>
#include <vector>

#include "rules/namespace.h"
#include "rules/written_namespace.h"

namespace remold {

struct RuleContext {
  std::string name;    // the rule file's stem, for messages and metrics
  std::string source;  // the rule file's path
  // Whether the rule file stacks two patterns (`pattern: [upper, lower]`).
  // Set by the loader.
  bool stacked = false;
  // The collections the rule shares with other rules by value of a field
  // (WrittenNamespace::share), each with every sharer's share, this rule's
  // included, in the order of the rule files. Set by the loader.
  struct SharedCollection {
    Namespace ns;
    std::vector<WrittenNamespace::Share> shares;
  };
  std::vector<SharedCollection> shared;
};

}  // namespace remold
