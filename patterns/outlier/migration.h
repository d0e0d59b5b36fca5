// The outlier pattern's migration (patterns/migration.h, PlanMigration):
// `remold migrate` runs rounds of the rule's own plans. Forward, documents
// with more than `threshold` elements, written before the rule (or left
// whole by a write that lost a race), have their overflow moved aside;
// back (--to flat, with `migrating: to_flat`), overflowed documents are
// stored whole and their pages retired. Reads through remold serve both
// forms throughout, so either runs while the application does.
#pragma once

#include <optional>
#include <string>

#include "patterns/array_aside/migration.h"
#include "patterns/array_aside/writes.h"
#include "patterns/migration.h"
#include "patterns/outlier/rule.h"
#include "rewrite/plan.h"

namespace remold {

inline std::string DocumentsToMigrate(const OutlierRule& rule, MigrationDirection direction) {
  return AsideDocumentsToMigrate(rule.Layout(), direction);
}
inline Plan MigrationRound(const OutlierRule& rule, MigrationDirection direction, const std::string& rule_name) {
  return AsideMigrationRound(rule_name, rule.Layout(), direction);
}
inline std::optional<MigrationDirection> MigratingTo(const OutlierRule& rule) {
  return rule.to_flat ? std::optional(MigrationDirection::kToFlat) : std::nullopt;
}

}  // namespace remold
