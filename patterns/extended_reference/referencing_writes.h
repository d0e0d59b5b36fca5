// Writes to the referencing collection of an extended reference rule: every
// document written carries the copy of the document it references.
//
// - insert (through the shared flow, patterns/source_writes/): the
//   referenced documents are read first (one find), then each document is
//   stored with its copy in `into` (a reference that names no document is a
//   write error, or a null copy, as the rule says; a document without a
//   reference gets no copy);
// - update and findAndModify: a statement that sets the reference gets the
//   copy in the same update (`$set`, or `$setOnInsert` for an upsert whose
//   filter pins the reference), one that unsets it loses the copy, and a
//   replacement carries it; so the client's write stays one backend write,
//   its txnNumber kept. Other operators on the reference, any write of the
//   copy itself and pipeline updates are refused before anything changes.
// In synced mode, the copies written are then checked against the
// referenced documents, which another client may have changed between the
// read and the write, and synced where they differ (copies.h, CopySync).
// Pure.
#pragma once

#include <memory>
#include <optional>

#include "patterns/extended_reference/rule.h"
#include "rewrite/command.h"
#include "rewrite/plan.h"

namespace remold {

std::optional<Plan> ReferencingInsert(const Command& command, const ExtendedReferenceRule& rule);
std::optional<Plan> ReferencingUpdate(const Command& command, const ExtendedReferenceRule& rule);
std::optional<Plan> ReferencingFindAndModify(const Command& command, const ExtendedReferenceRule& rule);

}  // namespace remold
