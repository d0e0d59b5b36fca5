// The reconcile part (patterns/reconcile.h) of the computed pattern: each
// cross-collection aggregate's maintained fields against its sources
// (reconcile_aggregate.h), then the same-document computed fields against
// their inputs (reconcile_fields.h); one summary for each.
#pragma once

#include <string>
#include <vector>

#include "patterns/computed/rule.h"
#include "patterns/reconcile.h"

namespace remold {

std::vector<Summary> Reconcile(const ComputedRule& computed, const ReconcileContext& context, const std::string& rule);

}  // namespace remold
