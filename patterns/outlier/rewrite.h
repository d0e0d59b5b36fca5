// The outlier pattern's rewrites (pure): the mechanism of an array stored
// partly aside (patterns/array_aside/), with the first `threshold`
// elements embedded and pages of `threshold` elements in the overflow
// collection.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "patterns/array_aside/rewrite.h"
#include "patterns/outlier/rule.h"
#include "rewrite/capabilities.h"
#include "rewrite/command.h"
#include "rewrite/plan.h"
#include "rules/rule_context.h"

namespace remold {

// The pattern's rewrite part (patterns/pattern.h).
inline std::optional<Plan> RewritePattern(const Command& command, const RuleContext& rule, const OutlierRule& outlier,
                                          const Capabilities& caps) {
  return RewriteAside(command, rule, outlier.Layout(), caps);
}
inline std::vector<Doc> ViewStages(const OutlierRule& rule) { return AsideViewStages(rule.Layout()); }
// The collection itself (its pages are looked up from it).
inline Namespace ViewSource(const OutlierRule& rule) { return rule.logical; }
// Every field but the array and the marker.
inline bool PassesThrough(const OutlierRule& rule, std::string_view field) {
  return AsidePassesThrough(rule.Layout(), field);
}
inline std::vector<BackendCommand> ViewPrerequisites(const OutlierRule& rule) {
  return AsideViewPrerequisites(rule.Layout());
}

}  // namespace remold
