// The reconcile part (patterns/reconcile.h) of the extended reference
// pattern: the copies the referencing documents hold against the documents
// they reference.
//
// The referencing documents are read (their _id, reference and copy), then
// checked in batches of 500: the referenced documents of a batch are read
// with one $in, and each document compared.
// - synced: the copy must be the referenced document's copy as it is now,
//   null when it no longer exists, and absent without a reference;
// - frozen: a copy is what it was when written and is not compared; a
//   document with a reference and no copy at all (written before the
//   rule) is drift, repaired with the copy as it is now.
// A drifted document is read again before it is reported, and --fix sets
// (or unsets) the copy where the document still holds the reference and
// the copy read.
#pragma once

#include <string>
#include <vector>

#include "patterns/extended_reference/rule.h"
#include "patterns/reconcile.h"

namespace remold {

std::vector<Summary> Reconcile(const ExtendedReferenceRule& reference, const ReconcileContext& context, const std::string& rule);

}  // namespace remold
