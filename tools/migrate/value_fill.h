// `remold migrate` for a rule whose form moves no document but keeps values
// derived from other documents (patterns/migration.h, ValueMigration):
// every value is checked against its sources and the ones that differ are
// set, under the guards of `remold reconcile --fix` (a document changed
// meanwhile is left for the next round), round after round until a round
// finds nothing to fill. Nothing is written with a dry run: one round
// reports what would be filled.
//
// There is no checkpoint: a fill killed at any point starts over, which
// only costs time (what was filled is found in step and left alone).
// --to flat has nothing to move, and --batch and --max-rate do not apply:
// both are refused.
#pragma once

#include <string_view>

#include "tools/migrate/migration_request.h"

namespace remold {

// `fills_on_write`: the rule says it is migrating (writes recompute what
// they touch). The exit status: 0 every value in step, 1 values left
// (changing faster than the rounds, or that cannot be computed); throws
// UsageError or BackendError.
int FillValues(const MigrationRequest& request, std::string_view pattern, bool fills_on_write);

}  // namespace remold
