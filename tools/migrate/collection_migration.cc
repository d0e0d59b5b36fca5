#include "tools/migrate/collection_migration.h"

#include <chrono>
#include <string>

#include "tools/common/progress.h"
#include "tools/common/tool_run.h"
#include "tools/migrate/checkpoint.h"

namespace remold {

int MigrateCollection(const MigrationRequest& request, std::string_view pattern, const DocumentMover& mover) {
  const Rule& rule = request.rule;
  const CollectionMove& move = mover.move;
  std::ostream& out = request.out;
  const bool dry_run = request.pass.dry_run;
  if (!request.to_rule() && !dry_run && !request.rules_given)
    throw UsageError("rule '" + rule.name + "' is in the rules directory remold serves (" + request.config.rules_dir +
                     "): reads through it see " + move.from.full() +
                     " only, so documents moved back would vanish from them. Remove the rule file from that "
                     "directory first (remold reloads), then run with --rules DIR naming a directory that holds it");
  out << "migrate: rule " << rule.name << " (" << pattern << ", " << rule.logical().full() << "): "
      << move.from.full() << " into " << move.to.full() << (dry_run ? " (dry run: nothing is written)" : "") << "\n";
  if (request.to_rule())
    out << "migrate: note: reads through remold see " << move.to.full()
        << " only: each batch appears in them as it moves\n";
  std::unique_ptr<BackendClient> backend = ConnectBackend(request.config, "remold-migrate");
  Checkpoint checkpoint = LoadCheckpoint(*backend, rule.name, rule.logical(), request.direction);
  if (checkpoint.resumed)
    out << "migrate: resuming from the checkpoint in " << CheckpointCollection(rule.logical()).full() << " ("
        << WithThousands(checkpoint.converted) << " moved before)\n";
  std::string error;
  const std::optional<Doc> source = Doc::FromJson(move.source, &error);
  if (!source) throw std::logic_error("rule '" + rule.name + "': bad move filter: " + error);
  const int64_t total = backend->CountDocuments(move.from, source->get(), kCountAll);
  out << std::flush;
  const auto start = std::chrono::steady_clock::now();
  MoveOutcome outcome;
  {
    Progress progress(request.err, request.err_is_terminal,
                      {"migrate: rule " + rule.name, move.from.full(), dry_run ? "read" : "moved",
                       move.from.collection, true},
                      total);
    outcome = RunMovePass(*backend, checkpoint, mover, request.pass, progress, out);
    progress.Finish();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (dry_run) {
    out << "migrate: dry run: " << WithThousands(outcome.moved) << " document(s) would move into "
        << WithThousands(outcome.written) << " of " << move.to.full() << ", " << WithThousands(outcome.failed)
        << " cannot\n";
    return outcome.failed > 0 ? kMigrationLeft : kMigrationDone;
  }
  out << "migrate: moved " << WithThousands(outcome.moved) << " document(s) in " << FormatSeconds(seconds) << " ("
      << FormatRate(outcome.moved, seconds) << ") into " << WithThousands(outcome.written) << " of "
      << move.to.full() << "; " << WithThousands(outcome.failed) << " cannot be moved; "
      << WithThousands(outcome.left) << " left in " << move.from.full() << "\n";
  if (outcome.left == 0) {
    out << "migrate: done: " << move.from.full()
        << (move.source == "{}" ? " is empty" : " holds none of them (" + move.source + ")")
        << (request.to_rule() ? "" : "; the rule can be deleted") << "\n";
    return kMigrationDone;
  }
  out << "migrate: " << WithThousands(outcome.left) << " document(s) left: ";
  if (outcome.in_flight > 0)
    out << WithThousands(outcome.in_flight) << " stamped by another run of this migration (running still, or killed "
        << "as it stamped them) after this one was done; ";
  if (outcome.failed > 0)
    out << "those reported above cannot be moved, or kept changing; run again after fixing them\n";
  else if (outcome.in_flight < outcome.left)
    out << "each changed every time it was read, before it could be moved; run again\n";
  else
    out << "run again\n";
  return kMigrationLeft;
}

}  // namespace remold
