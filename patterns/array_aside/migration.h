// The migration of an array stored partly aside (patterns/migration.h,
// PlanMigration): `remold migrate` runs rounds of the rule's own plans.
// Forward, documents with more than `first` elements, written before the
// rule (or left whole by a write that lost a race), have the rest moved
// aside; back (--to flat, with `migrating: to_flat`), marked documents are
// stored whole and their pages retired. Reads through remold serve both
// forms throughout, so either runs while the application does.
#pragma once

#include <string>

#include "patterns/array_aside/layout.h"
#include "patterns/migration_direction.h"

namespace remold {

// A filter (Extended JSON) on the logical collection: the documents a
// migration in `direction` still has to convert.
// A round is AsideMigrationRound (writes.h).
std::string AsideDocumentsToMigrate(const AsideLayout& layout, MigrationDirection direction);

}  // namespace remold
