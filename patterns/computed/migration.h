// The computed pattern's migration part (patterns/migration.h,
// ValueMigration): its form moves no document, so a migration fills the
// values it maintains.
#pragma once

#include "patterns/migration.h"
#include "rules/rule.h"

namespace remold {

// The rule says `migrating: true`: writes recompute the targets they touch.
inline bool FillsValuesOnWrite(const ComputedRule& rule) { return rule.migrating; }

}  // namespace remold
