// The history pattern's rewrites (pure): the mechanism of an array stored
// partly aside (patterns/array_aside/), with nothing of the whole
// embedded, one element per document of the history collection, and a
// copy of the latest `keep` elements in the document.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "patterns/array_aside/rewrite.h"
#include "patterns/history/rule.h"
#include "rewrite/capabilities.h"
#include "rewrite/command.h"
#include "rewrite/plan.h"
#include "rules/rule_context.h"

namespace remold {

// The pattern's rewrite part (patterns/pattern.h).
inline std::optional<Plan> RewritePattern(const Command& command, const RuleContext& rule, const HistoryRule& history,
                                          const Capabilities& caps) {
  return RewriteAside(command, rule, history.Layout(), caps);
}
inline std::vector<Doc> ViewStages(const HistoryRule& rule) { return AsideViewStages(rule.Layout()); }
// The collection itself (its events are looked up from it).
inline Namespace ViewSource(const HistoryRule& rule) { return rule.logical; }
// Every field but the array and the marker.
inline bool PassesThrough(const HistoryRule& rule, std::string_view field) {
  return AsidePassesThrough(rule.Layout(), field);
}
inline std::vector<BackendCommand> ViewPrerequisites(const HistoryRule& rule) {
  return AsideViewPrerequisites(rule.Layout());
}

}  // namespace remold
