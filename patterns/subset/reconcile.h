// The reconcile part (patterns/reconcile.h) of the subset pattern: each
// parent's embedded array against the first N of its children.
//
// The parents are streamed; for each, its children are read in the rule's
// order (one query per parent: an index on {<link>, <sort keys>} serves
// it). A parent whose array differs is read again, then its children (in
// that order, so that a child written meanwhile shows up as drift only if
// its follow-up is still missing), and reported if it still differs. With
// --fix the array is set where the parent still holds what was read. A
// parent without children holds [] or no array at all.
#pragma once

#include <string>
#include <vector>

#include "patterns/reconcile.h"
#include "patterns/subset/rule.h"

namespace remold {

std::vector<Summary> Reconcile(const SubsetRule& subset, const ReconcileContext& context, const std::string& rule);

}  // namespace remold
