// Reconciling one subset rule (patterns/subset/rule.h): each parent's
// embedded array against the first N of its children.
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

#include "ruleset/rule.h"
#include "tools/reconcile/context.h"

namespace remold {

Summary CheckSubset(const CheckContext& context, const std::string& rule, const SubsetRule& subset);

}  // namespace remold
