// The extended reference pattern (patterns/extended_reference/rule.h):
// writes to the referencing collection carry the copy of the document they
// reference (referencing_writes.h); in synced mode, writes to the
// referenced collection through remold are followed by the sync of every
// copy of the documents they changed (copies.h), through the shared write
// flows (patterns/source_writes/). Reads are not rewritten: the copy is a
// field like any other.
// Pure.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "patterns/extended_reference/rule.h"
#include "rewrite/capabilities.h"
#include "rewrite/command.h"
#include "rewrite/plan.h"
#include "rules/rule_context.h"

namespace remold {

// The pattern's rewrite part (patterns/pattern.h); commands on the
// referenced collection reach it in synced mode (it watches it).
std::optional<Plan> RewritePattern(const Command& command, const RuleContext& rule,
                                   const ExtendedReferenceRule& reference, const Capabilities& caps);

// None: documents are stored as written, the copy among their fields.
inline std::vector<Doc> ViewStages(const ExtendedReferenceRule&) { return {}; }
inline Namespace ViewSource(const ExtendedReferenceRule& rule) { return rule.logical; }
inline bool PassesThrough(const ExtendedReferenceRule&, std::string_view) { return true; }

}  // namespace remold
