// Where a migration stands, kept in the backend so that a migration killed
// at any point resumes: one document per rule in the collection
// `remold_migrations` of the rule's database,
//   {_id: <rule name>, namespace, direction: "to_rule" | "to_flat",
//    after: <the last _id of the last batch done>, converted, failed,
//    started, updated, finished: <date, once nothing was left>,
//    written: [<the tokens of the batches written, for moves between
//               collections (tools/migrate/move_pass.h)>]}
// Saved after every batch; a checkpoint of the other direction, or of a
// finished migration, is started over.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/doc.h"
#include "patterns/migration.h"
#include "rules/namespace.h"
#include "tools/common/backend_client.h"

namespace remold {

struct Checkpoint {
  std::string rule;
  Namespace ns;  // the rule's collection
  MigrationDirection direction = MigrationDirection::kToRule;
  std::optional<Doc> after;  // {_id: <value>}; none: from the start
  int64_t converted = 0;
  int64_t failed = 0;
  bool resumed = false;  // loaded from an unfinished run
  bool stored = false;   // in the backend already (resumed, or saved once)
};

// "to_rule" / "to_flat".
std::string DirectionName(MigrationDirection direction);

// The collection holding the checkpoints of rules on `ns`'s database.
Namespace CheckpointCollection(const Namespace& ns);

// The unfinished checkpoint of `rule` in this direction, or a fresh one.
Checkpoint LoadCheckpoint(BackendClient& backend, const std::string& rule, const Namespace& ns,
                          MigrationDirection direction);

// Stores it (upsert); `finished` also records the end. The first save of
// a fresh run records its start.
void SaveCheckpoint(BackendClient& backend, Checkpoint& checkpoint, bool finished);

// The batches of a move written to their destination, kept as a set in
// the backend (every run of the rule reads and adds to it, so several runs
// at once agree on it). A token stays until the migration is over
// (ForgetBatches): a run that read a batch while another was deleting it
// must still find it written.
void MarkBatchWritten(BackendClient& backend, Checkpoint& checkpoint, const std::string& token);
void ForgetBatches(BackendClient& backend, const Checkpoint& checkpoint);
// Read from the backend, not from `checkpoint`: another run may have
// written the batch since this one loaded it.
bool BatchWritten(BackendClient& backend, const Checkpoint& checkpoint, const std::string& token);

}  // namespace remold
