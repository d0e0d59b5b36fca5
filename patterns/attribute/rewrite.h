// The attribute pattern's rewrites: filters become $elemMatch on the {k, v}
// array, writes fold attributes into it, reads unfold them back.
//
// Returns nullopt for commands the pattern leaves alone (they are forwarded
// as they are); anything it cannot do exactly is refused with a
// MongoDB-shaped error.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "patterns/attribute/rule.h"
#include "rewrite/capabilities.h"
#include "rewrite/command.h"
#include "rewrite/plan.h"
#include "rules/rule_context.h"

namespace remold {

// The pattern's rewrite part (patterns/pattern.h).
std::optional<Plan> RewritePattern(const Command& command, const RuleContext& rule,
                                   const AttributeRule& attribute, const Capabilities& caps);

// Unfolding: the pairs back into top-level fields, the array dropped.
std::vector<Doc> ViewStages(const AttributeRule& rule);
// The view reads the collection itself.
inline Namespace ViewSource(const AttributeRule& rule) { return rule.logical; }
// A fixed field (not an attribute, not the pair array): the view keeps it.
inline bool PassesThrough(const AttributeRule& rule, std::string_view field) {
  return field != rule.array_field && !rule.IsAttribute(field);
}

// The createIndexes command that ensures {array.k: 1, array.v: 1} exists.
BackendCommand EnsureAttributeIndex(const AttributeRule& rule);

}  // namespace remold
