// One migration pass that moves documents between two collections
// (patterns/migration.h, CollectionMigration: readings into buckets and
// back), batch by batch, every document exactly once:
//
//  1. the next batch, the first of what is left in the source in the
//     move's order (an index on it, `remold_migrate_order`, is created for
//     the migration and dropped once nothing is left), is stamped,
//     {$set: {_remold_migration: <token>}} where no stamp is yet;
//  2. the stamped documents are read back and written to the destination
//     without the stamp, under _ids that the pattern derives from the
//     token or keeps from the source: written again, they meet duplicate
//     keys instead of being stored twice;
//  3. the checkpoint adds the token to its set of batches written;
//  4. the stamped sources are deleted; where sources may change meanwhile,
//     each under a guard that it is as stamped, and one that changed is
//     written again (what it held already moved meets its duplicates; in a
//     one-to-one move, its copy is replaced) and deleted again.
//
// A run killed at any point leaves stamped sources behind; the next run
// finishes their batch first: it writes them again unless the checkpoint
// says their token was written (a partial delete would have changed the
// batch), then deletes them, and takes the token out of the set. Runs of
// the same rule at once are safe too: a run finishing another's batch asks
// whether it was written only after reading it. Once nothing unstamped is
// left, a run finishes the batches stamped since it began the same way,
// and reads again: another run's, killed meanwhile, or a killed run's own
// last stamp, which the server applies after its client is gone (a run
// started at once after the kill does not see it yet; one started after
// its end finds nothing left to stamp). A source the pattern cannot move, or whose
// write fails, is reported once, unstamped, and left where it is; one that
// keeps changing is unstamped and left for the next run. With `dry_run`
// nothing is stamped or written: the pass reads in order and reports what
// it would do.
#pragma once

#include <ostream>

#include "patterns/migration.h"
#include "tools/common/backend_client.h"
#include "tools/common/progress.h"
#include "tools/migrate/checkpoint.h"
#include "tools/migrate/document_pass.h"

namespace remold {

struct DocumentMover {
  CollectionMove move;
  std::function<MovedBatch(const std::vector<Doc>& batch, std::string_view token)> moved;
};

struct MoveOutcome {
  int64_t moved = 0;    // sources moved this run (with dry_run: would be)
  int64_t written = 0;  // destination documents written this run (with dry_run: would be)
  int64_t failed = 0;   // sources that cannot be moved, this run
  int64_t left = 0;     // still in the source at the end (not counted with dry_run)
  int64_t in_flight = 0;  // of `left`, stamped by another run still moving them
};

// The field that stamps a source document with the batch moving it.
inline constexpr const char* kMoveStampField = "_remold_migration";

// Throws BackendError when the backend fails.
MoveOutcome RunMovePass(BackendClient& backend, Checkpoint& checkpoint, const DocumentMover& mover,
                        const PassOptions& options, Progress& progress, std::ostream& report);

}  // namespace remold
