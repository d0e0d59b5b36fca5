// The reconcile part (patterns/reconcile.h) of every pattern that has one:
// `remold reconcile` (and `remold migrate`, which fills values with it)
// includes this one header, and learns from it which rules it checks.
#pragma once

#include <string>
#include <vector>

#include "patterns/computed/reconcile.h"
#include "patterns/extended_reference/reconcile.h"
#include "patterns/reconcile.h"
#include "patterns/subset/reconcile.h"
#include "ruleset/patterns.h"

namespace remold {

// Whether `layer`'s pattern has a reconcile part.
inline bool IsReconciled(const PatternRule& layer) {
  return std::visit([]<typename R>(const R&) { return Reconciliation<R>; }, layer);
}

// The check of `layer`, run for the rule named `rule`: its summaries, none
// for a pattern without a reconcile part.
inline std::vector<Summary> ReconcileLayer(const PatternRule& layer, const ReconcileContext& context,
                                           const std::string& rule) {
  return std::visit(
      [&]<typename R>(const R& pattern) -> std::vector<Summary> {
        if constexpr (Reconciliation<R>) return Reconcile(pattern, context, rule);
        else return {};
      },
      layer);
}

// The names of the patterns with a reconcile part, in the list's order:
// {"computed", "subset", "extended_reference"}.
inline std::vector<std::string> ReconciledPatterns() {
  std::vector<std::string> names;
  ForEachPatternType([&]<typename R>() {
    if constexpr (Reconciliation<R>) names.emplace_back(R::kName);
  });
  return names;
}

}  // namespace remold
