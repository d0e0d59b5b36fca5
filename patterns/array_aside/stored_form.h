// How an array stored partly aside is stored (layout.h), and the pipeline
// that reads it back whole (pure).
//
// A document whose array has at most `first` elements is stored as
// written. Beyond that, the array keeps its first `first` elements (or,
// with first 0, a copy of the latest `latest`) and the document gets a
// marker after its own fields:
//   <marker>: {key: <ObjectId>, pages: P, tail: [...]}
// The rest of the whole array is, in order, the elements of the aside
// documents of the key, seq 0..P-1 (pages {_id, parent: <key>, seq,
// elements: [...]} of `page` elements, or, one per element, {_id, key,
// parent: <the document's _id>, seq, event}), then `tail` (absent while
// empty): where appends go, one atomic update of the document. A full tail
// moves to page P (written first, then counted by an update of the
// document that takes it off the tail), so a reader, who sees only pages
// below P, never sees an element twice or not at all. A page is written
// once, under a key that names one state of one document (derived from its
// bytes), and never changed: a document whose array is rewritten gets a
// new key, and the pages of the old one are deleted once no document names
// it.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/doc.h"
#include "patterns/array_aside/layout.h"
#include "rewrite/plan.h"

namespace remold {

// {<marker>.key: {$exists: true}} (EnsureMarkedIndex serves it), and
// {<marker>: {$exists: false}}.
Doc MarkedFilter(const AsideLayout& rule);
Doc UnmarkedFilter(const AsideLayout& rule);

// The stages that make each stored document the document as written: the
// pages looked up by the marker's key (none for unmarked documents), the
// array put back together, the marker gone.
std::vector<Doc> AsideViewStages(const AsideLayout& rule);

// A document that may need its overflow moved aside: unmarked with more
// than `first` elements, or marked with a full tail. A filter that
// finds candidates ({$or: [...]}, an index on nothing); MovedAside says
// what to write for each.
Doc NeedsMovingAsideFilter(const AsideLayout& rule);

// The writes that store `stored` (as read) in the rule's form: the pages,
// then the guarded update of the document itself. Nothing when it needs
// none. Replayed against a changed document, the guard matches nothing
// and the pages are never named.
struct MoveAside {
  std::vector<Doc> pages;         // replacement upserts ({q, u, upsert}) on the overflow collection
  std::optional<Doc> document;    // the update statement ({q, u}) on the logical collection
};
// A new key is derived from the document as stored and `writer`, the
// bytes of the client command whose write led here (its session and
// txnNumber among them): the same state written by another command gets
// another key, and a retried command writes the same pages again.
MoveAside MovedAside(const AsideLayout& rule, const Doc& stored, std::span<const uint8_t> writer);

// The index of the aside collection on the key (and seq), which the view's
// $lookup uses (for every document read through it: an unmarked one finds
// nothing there in one index probe). With `creates` (a write's plan:
// its user may create it) it creates the collection too, so that the
// view's $lookup never names a missing one (DocumentDB refuses a $out or
// $merge after such a $lookup); a read's plan skips it while missing.
BackendCommand EnsurePagesIndex(const AsideLayout& rule, bool creates);

// With one element per aside document: the application's index on
// {parent, seq} (an order's events in order), which remold makes and does
// not read by; an index of the same keys under another name holds.
std::optional<BackendCommand> EnsureParentIndex(const AsideLayout& rule, bool creates);

// The sparse index of the logical collection on the marker's key: the
// overflowed documents, found without a scan by every read that must look
// at them whatever its filter says of the array (listIndexes shows it).
BackendCommand EnsureMarkedIndex(const AsideLayout& rule);

// The guard of a write that replaces `stored` (as read) by another form of
// it: UnchangedDocument, with the array's and the tail's lengths said
// again as $size clauses (an engine that compares arrays by prefix in an
// $expr, as mongo-java-server does, would otherwise miss an append).
Doc UnchangedAside(const AsideLayout& rule, const Doc& stored);

// The key of a marked document, boxed ({v: key}); nullopt when unmarked.
std::optional<Doc> MarkerKey(const AsideLayout& rule, const Doc& stored);

}  // namespace remold
