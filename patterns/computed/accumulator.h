// The $group accumulator that recomputes a maintained field (rule.h,
// MaintainedField) from its sources, written once for the rule's writes
// (maintenance.h, filling the values of a migrating rule) and for
// `remold reconcile` (reconcile_expected.h):
//   count   {$sum: 1}           sum  {$sum: "$<of>"}
//   min     {$min: "$<of>"}     max  {$max: "$<of>"}
//   latest  {$first: "$<of>"}, over the sources sorted by `by`, greatest first
// Pure.
#pragma once

#include "common/doc.h"
#include "patterns/computed/rule.h"

namespace remold {

Doc GroupAccumulator(const MaintainedField& field);

}  // namespace remold
