// The subset pattern (patterns/subset/rule.h): writes to the children keep
// each parent's embedded array in step (follower.h), through the shared
// write flows (patterns/source_writes/): inserts are stored as sent and
// pushed; deletes and updates read the children they change through
// findAndModify. A drop of children that still exist is refused. Reads,
// and writes that touch no copied field, are not rewritten.
// Pure.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "patterns/subset/rule.h"
#include "rewrite/capabilities.h"
#include "rewrite/command.h"
#include "rewrite/plan.h"
#include "rules/rule_context.h"

namespace remold {

// The pattern's rewrite part (patterns/pattern.h).
std::optional<Plan> RewritePattern(const Command& command, const RuleContext& rule, const SubsetRule& subset,
                                   const Capabilities& caps);

// None: the children are stored as the application wrote them.
inline std::vector<Doc> ViewStages(const SubsetRule&) { return {}; }
// The collection itself.
inline Namespace ViewSource(const SubsetRule& rule) { return rule.logical; }
// Every field: there is no view.
inline bool PassesThrough(const SubsetRule&, std::string_view) { return true; }

}  // namespace remold
