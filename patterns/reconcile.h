// The optional reconcile part of a pattern: what `remold reconcile` checks
// and repairs for a rule that keeps values or copies derived from other
// documents (a computed rule's values, a subset's embedded array, an
// extended reference's copies), which a write that bypassed remold, or
// data written before the rule, may have left behind. A pattern provides
// it by this overload for its rule type R, in patterns/<name>/reconcile.h;
// the tool finds it with the concept below (ruleset/reconciles.h lists the
// headers), and says which rules it reconciles from the patterns that
// satisfy it:
//
//   std::vector<Summary> Reconcile(const R&, const ReconcileContext&, const std::string& rule_name);
//       // recomputes every value the rule maintains from the source
//       // data, reports each drifted document through the context, and
//       // with context.fix() repairs it under a guard that it is as read
//       // (a document changed meanwhile is left alone and reported as
//       // such); one Summary per collection checked
//
// The check reads and writes only through the context
// (patterns/reconcile/context.h), and compares and reports with the
// pattern-blind kit of patterns/reconcile/ (values, drift, guarded
// repairs). `remold migrate` runs the same check with repairs to fill the
// values of a rule that migrates by filling them (patterns/migration.h,
// FillsValuesOnWrite).
#pragma once

#include <concepts>
#include <string>
#include <vector>

#include "patterns/reconcile/context.h"
#include "patterns/reconcile/drift.h"

namespace remold {

template <typename R>
concept Reconciliation = requires(const R& rule, const ReconcileContext& context, const std::string& name) {
  { Reconcile(rule, context, name) } -> std::same_as<std::vector<Summary>>;
};

}  // namespace remold
