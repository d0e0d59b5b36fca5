// `remold migrate` for a rule whose form lives in another collection
// (patterns/migration.h, CollectionMigration: readings in buckets): runs
// the move pass (tools/migrate/move_pass.h) and reports what moved, into
// how many documents, what cannot move, and what is left.
//
// Back to the flat form, the rule must no longer be served: reads through
// remold see the rule's collection alone, so documents moved back would
// vanish from them. Without --rules (the configuration's directory, the
// one remold serves), --to flat is refused.
#pragma once

#include <string_view>

#include "tools/migrate/migration_request.h"
#include "tools/migrate/move_pass.h"

namespace remold {

// The exit status; throws UsageError or BackendError.
int MigrateCollection(const MigrationRequest& request, std::string_view pattern, const DocumentMover& mover);

}  // namespace remold
