// `remold migrate` for a rule whose form moves no document but keeps values
// derived from other documents (patterns/migration.h, ValueMigration):
// every value is checked against its sources and the ones that differ are
// set, under the guards of `remold reconcile --fix` (a document changed
// meanwhile is left for the next round), round after round until a round
// finds nothing to fill. Nothing is written with `dry_run`: one round
// reports what would be filled.
//
// There is no checkpoint: a fill killed at any point starts over, which
// only costs time (what was filled is found in step and left alone).
#pragma once

#include <ostream>

#include "rules/rule.h"
#include "tools/common/backend_client.h"

namespace remold {

// The exit status: 0 every value in step, 1 values left (changing faster
// than the rounds, or that cannot be computed).
int FillValues(BackendClient& backend, const Rule& rule, bool dry_run, std::ostream& out, std::ostream& err,
               bool err_is_terminal);

}  // namespace remold
