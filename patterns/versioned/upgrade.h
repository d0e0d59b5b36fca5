// Upgrading one stored document to the current version, in C++ (pure): what
// `remold migrate` and a guarded write-back store, and what the view's
// aggregation stages (view.h) compute for a read. The two agree exactly.
//
// A document's version is the rule's field: missing or null is the first
// version; a number equal to a version is that version; anything else is
// a version remold does not know, and the document is left as it is. Each
// step of each later version runs in order, and the field is then set to
// that version (in its place, or added last). A step that cannot apply
// (a subdocument to move into that is not a document, a string computed
// from a value that is not a string) leaves the document at the version
// it had before that version's steps, with why.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/doc.h"
#include "patterns/versioned/rule.h"

namespace remold {

struct UpgradedDocument {
  Doc document;                   // upgraded as far as it goes
  std::optional<int32_t> from;    // the version read (none: unknown)
  std::optional<int32_t> reached; // the version it is at now
  std::string why;                // why it stopped before the current version
  bool changed() const { return from != reached; }
};

UpgradedDocument Upgrade(const VersionedRule& rule, const bson_t* document);

// The version of a stored document, when it is one of the rule's.
std::optional<int32_t> VersionOf(const VersionedRule& rule, const bson_t* document);

}  // namespace remold
