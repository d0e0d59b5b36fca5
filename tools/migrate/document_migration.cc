#include "tools/migrate/document_migration.h"

#include <chrono>

#include "tools/common/progress.h"
#include "tools/common/tool_run.h"
#include "tools/migrate/checkpoint.h"

namespace remold {

int MigrateDocuments(const MigrationRequest& request, const DocumentConverter& converter, const std::string& note) {
  const Rule& rule = request.rule;
  const Namespace ns = rule.logical();
  const bool to_rule = request.to_rule();
  std::ostream& out = request.out;
  out << "migrate: rule " << rule.name << " (" << rule.pattern_name() << ", " << ns.full() << "): "
      << (to_rule ? "documents into the rule's form" : "documents back to the flat form")
      << (request.pass.dry_run ? " (dry run: nothing is written)" : "") << "\n"
      << note;
  std::unique_ptr<BackendClient> backend = ConnectBackend(request.config, "remold-migrate");
  Checkpoint checkpoint = LoadCheckpoint(*backend, rule.name, ns, request.direction);
  if (checkpoint.resumed)
    out << "migrate: resuming from the checkpoint in " << CheckpointCollection(ns).full() << " ("
        << WithThousands(checkpoint.converted) << " converted before)\n";
  const int64_t total = backend->CountDocuments(ns, converter.source.get(), kCountAll);
  out << std::flush;
  const auto start = std::chrono::steady_clock::now();
  PassOutcome outcome;
  {
    Progress progress(request.err, request.err_is_terminal,
                      {"migrate: rule " + rule.name, ns.full(), request.pass.dry_run ? "read" : "converted",
                       ns.collection, true},
                      total);
    outcome = RunDocumentPass(*backend, checkpoint, converter, request.pass, progress, out);
    progress.Finish();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (request.pass.dry_run) {
    out << "migrate: dry run: " << WithThousands(outcome.converted) << " document(s) would be converted, "
        << WithThousands(outcome.failed) << " cannot be\n";
    return outcome.failed > 0 ? kMigrationLeft : kMigrationDone;
  }
  out << "migrate: converted " << WithThousands(outcome.converted) << " document(s) in " << FormatSeconds(seconds)
      << " (" << FormatRate(outcome.converted, seconds) << "); " << WithThousands(outcome.failed)
      << " cannot be converted; " << WithThousands(outcome.left) << " left in " << converter.source_form << "\n";
  if (outcome.left == 0) {
    out << "migrate: done: every document of " << ns.full() << " is in the "
        << (to_rule ? "rule's form; " : "flat form; ") << converter.when_done << "\n";
    return kMigrationDone;
  }
  out << "migrate: " << WithThousands(outcome.left) << " document(s) left: ";
  if (outcome.failed > 0)
    out << (to_rule ? "those reported above cannot be converted, " : "those reported above cannot be unfolded, ")
        << "or kept changing; run again after fixing them\n";
  else
    out << "each changed every time it was read, before it could be written converted; run again\n";
  return kMigrationLeft;
}

}  // namespace remold
