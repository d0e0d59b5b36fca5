#include "patterns/computed/reconcile.h"

#include "patterns/computed/reconcile_aggregate.h"
#include "patterns/computed/reconcile_fields.h"

namespace remold {

std::vector<Summary> Reconcile(const ComputedRule& computed, const ReconcileContext& context, const std::string& rule) {
  std::vector<Summary> summaries;
  for (const ComputedAggregate& aggregate : computed.aggregates)
    summaries.push_back(CheckAggregate(context, rule, computed.logical, aggregate));
  if (!computed.fields.empty()) summaries.push_back(CheckFields(context, rule, computed));
  return summaries;
}

}  // namespace remold
