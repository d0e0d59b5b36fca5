// The computed pattern (ruleset/rule.h, ComputedRule): values derived on
// write. Writes to the rule's collection are rewritten so that
//  - inserts and replacements carry their same-document computed fields;
//  - the maintained fields of linked target documents follow every insert,
//    delete and update of a source document (computed_maintenance.h);
//  - updates that change a computed field's inputs are followed by its
//    repair (computed_fields.h).
// Deletes and updates read the documents they change through
// findAndModify, so the values removed are exactly those of the documents
// removed. Reads, and writes that touch no input, are not rewritten.
// Pure.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "patterns/computed/rule.h"
#include "rewrite/capabilities.h"
#include "rewrite/command.h"
#include "rewrite/plan.h"
#include "rules/rule_context.h"

namespace remold {

// The pattern's rewrite part (patterns/pattern.h).
std::optional<Plan> RewritePattern(const Command& command, const RuleContext& rule,
                                   const ComputedRule& computed, const Capabilities& caps);

// None: documents are stored as the application wrote them, with the
// computed values among their fields.
std::vector<Doc> ViewStages(const ComputedRule& rule);
// The collection itself.
inline Namespace ViewSource(const ComputedRule& rule) { return rule.logical; }
// Every field: there is no view.
inline bool PassesThrough(const ComputedRule&, std::string_view) { return true; }

}  // namespace remold
