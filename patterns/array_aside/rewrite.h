// The rewrites of a collection whose array is stored partly aside
// (layout.h; pure): the application reads and writes whole arrays;
// marked documents are stored as stored_form.h says.
//
// Reads (find, count, distinct, aggregate) of the array, or filtered or
// sorted on it, run as aggregates over the view (stored_form.h):
//   [{$match: {<clauses not on the array>, $or: [F, <marked>]}},
//    <view stages>..., {$match: F}, ...]
// exact for any filter F, with the clauses that keep an index usable at
// the top. A find that selects and sorts by other fields is sent as it is,
// its marked documents made whole after (assembly.h): unmarked documents
// cost what they cost without the rule.
// Writes (writes.h): a $push onto the array of one document by _id appends
// to the document's tail when it is marked (and, with a copy of the latest
// elements, onto that copy, trimmed), as sent otherwise; other writes that
// change or select by the array first put each marked document they match
// back whole (under a guard that it is unchanged), then run as sent on
// unmarked documents. Afterwards, documents the write left with more than
// `first` elements have the rest moved aside, and the pages no document
// names any more are deleted.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "patterns/array_aside/layout.h"
#include "patterns/array_aside/stored_form.h"
#include "rewrite/capabilities.h"
#include "rewrite/command.h"
#include "rewrite/plan.h"
#include "rules/rule_context.h"

namespace remold {

// The plan for a command on `layout.logical`; nullopt: forward it unchanged.
std::optional<Plan> RewriteAside(const Command& command, const RuleContext& rule, const AsideLayout& layout,
                                 const Capabilities& caps);

// Every field but the array and the marker passes the view unchanged.
inline bool AsidePassesThrough(const AsideLayout& layout, std::string_view field) {
  return field != layout.array && field != layout.marker;
}

// The view looks pages up in the aside collection: it is made before a
// pipeline that writes its output reads through the view.
inline std::vector<BackendCommand> AsideViewPrerequisites(const AsideLayout& layout) {
  return {EnsurePagesIndex(layout, /*creates=*/true)};
}

}  // namespace remold
