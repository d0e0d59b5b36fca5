// The outlier pattern's rewrites (pure): the application reads and writes
// whole arrays; documents whose array overflowed are stored as
// stored_form.h says.
//
// Reads (find, count, distinct, aggregate) of the array, or filtered or
// sorted on it, run as aggregates over the view (stored_form.h):
//   [{$match: {<clauses not on the array>, $or: [F, <overflowed>]}},
//    <view stages>..., {$match: F}, ...]
// exact for any filter F, with the clauses that keep an index usable at
// the top. A find that selects and sorts by other fields is sent as it is,
// its overflowed documents made whole after (assembly.h): documents
// without overflow cost what they cost without the rule.
// Writes (writes.h): a $push onto the array of one document by _id appends
// to the document's tail when it overflowed, as sent otherwise; other
// writes that change or select by the array first put each overflowed
// document they match back whole (under a guard that it is unchanged),
// then run as sent on documents without overflow. Afterwards, documents
// the write left with more than `threshold` elements have the rest moved
// aside, and the pages no document names any more are deleted.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "patterns/outlier/stored_form.h"
#include "rewrite/capabilities.h"
#include "rewrite/command.h"
#include "rewrite/plan.h"
#include "rules/rule.h"

namespace remold {

// The pattern's rewrite part (patterns/pattern.h).
std::optional<Plan> RewritePattern(const Command& command, const Rule& rule, const OutlierRule& outlier,
                                   const Capabilities& caps);

inline std::vector<Doc> ViewStages(const OutlierRule& rule) { return OutlierViewStages(rule); }
// The collection itself (its pages are looked up from it).
inline Namespace ViewSource(const OutlierRule& rule) { return rule.logical; }
// Every field but the array and the marker.
inline bool PassesThrough(const OutlierRule& rule, std::string_view field) {
  return field != rule.array && field != kOutlierMarker;
}
// The view looks pages up in the overflow collection: it is made before a
// pipeline that writes its output reads through the view.
inline std::vector<BackendCommand> ViewPrerequisites(const OutlierRule& rule) {
  return {EnsurePagesIndex(rule, /*creates=*/true)};
}

}  // namespace remold
