// The versioned pattern's rewrites (pure): reads see every document at the
// current version, writes store it.
//
// Reads (find, count, distinct, aggregate) run as aggregates over the
// upgrade stages (view.h):
//   [{$match: {$or: [{$and: [<not older>, F]}, {$and: [<older>, P]}]}},
//    <upgrade stages>..., {$match: F}, ...]
// exact for any filter F; P, the clauses of F on fields no upgrade changes,
// keeps an index usable for the documents not yet upgraded too.
// Writes (update, delete, findAndModify) first store upgraded the older
// documents their filters match (each under a guard that it is unchanged
// since read), then run as sent: they meet current documents only.
// Inserts, replacements and upserts store the current version.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "patterns/versioned/rule.h"
#include "rewrite/capabilities.h"
#include "rewrite/command.h"
#include "rewrite/plan.h"
#include "rules/rule_context.h"

namespace remold {

// The pattern's rewrite part (patterns/pattern.h).
std::optional<Plan> RewritePattern(const Command& command, const RuleContext& rule,
                                   const VersionedRule& versioned, const Capabilities& caps);

// The upgrade stages.
std::vector<Doc> ViewStages(const VersionedRule& rule);
// The view reads the collection itself.
inline Namespace ViewSource(const VersionedRule& rule) { return rule.logical; }
// A field no upgrade step changes (the version field is changed).
inline bool PassesThrough(const VersionedRule& rule, std::string_view field) { return !rule.Changes(field); }

}  // namespace remold
