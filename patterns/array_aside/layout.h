// An array stored partly aside: the mechanism behind the outlier and the
// history patterns, not a pattern itself (each pattern's rule says how it
// lays its array out; nothing here names either).
//
// A document whose array has at most `first` elements, and no marker, is
// stored as written. Beyond that the document keeps, in the array, either
// its first `first` elements (a part of the whole) or a copy of its latest
// `latest` elements (when `first` is 0: the whole is aside), and gets a
// marker after its own fields:
//   <marker>: {key: <ObjectId>, pages: P, tail: [...]}
// The rest of the whole array is, in order, the elements of the aside
// documents of `key`, seq 0..P-1, each holding `page` elements, then
// `tail` (absent while empty), where appends go. See stored_form.h for the
// aside documents and how a full tail moves to a page.
#pragma once

#include <cstdint>
#include <string>

#include "rules/namespace.h"

namespace remold {

struct AsideLayout {
  std::string pattern;   // the rule's pattern, in messages: "<pattern> rule 'NAME' for DB.COLL"
  Namespace logical;     // the collection the application names
  std::string array;     // a top-level field
  Namespace aside;       // where the rest of the array is stored
  std::string marker;    // a top-level field of remold's: "_remold_<pattern>"
  int32_t first = 0;     // elements the document keeps as the start of the whole (0: none)
  int32_t latest = 0;    // with first == 0: a copy of the latest elements the document keeps
  int32_t page = 1;      // elements per aside document
  // One element per aside document, {_id, key, parent: <the document's
  // _id>, seq, event} (an application reads them as a collection of its
  // own); else pages {_id, parent: <key>, seq, elements: [...]}.
  bool one_per_document = false;
  // On the way out (`migrating: to_flat`): writes store documents whole.
  bool to_flat = false;

  // The field of an aside document that holds its key.
  const char* KeyField() const { return one_per_document ? "key" : "parent"; }
  // Whether the document's array is the start of the whole array (else a
  // copy of its end, or nothing, while the document is marked).
  bool ArrayStartsWhole() const { return first > 0; }
};

}  // namespace remold
