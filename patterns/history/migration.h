// The history pattern's migration (patterns/migration.h, PlanMigration):
// `remold migrate` runs rounds of the rule's own plans (patterns/array_aside/
// migration.h). Forward, documents written before the rule have their
// elements stored in the history collection; back (--to flat, with
// `migrating: to_flat`), marked documents are stored whole and their
// history documents retired. Reads through remold serve both forms
// throughout, so either runs while the application does.
#pragma once

#include <optional>
#include <string>

#include "patterns/array_aside/migration.h"
#include "patterns/array_aside/writes.h"
#include "patterns/history/rule.h"
#include "patterns/migration.h"
#include "rewrite/plan.h"

namespace remold {

inline std::string DocumentsToMigrate(const HistoryRule& rule, MigrationDirection direction) {
  return AsideDocumentsToMigrate(rule.Layout(), direction);
}
inline Plan MigrationRound(const HistoryRule& rule, MigrationDirection direction, const std::string& rule_name) {
  return AsideMigrationRound(rule_name, rule.Layout(), direction);
}
inline std::optional<MigrationDirection> MigratingTo(const HistoryRule& rule) {
  return rule.to_flat ? std::optional(MigrationDirection::kToFlat) : std::nullopt;
}

}  // namespace remold
