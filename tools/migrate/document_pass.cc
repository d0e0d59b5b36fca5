#include "tools/migrate/document_pass.h"

#include <chrono>

#include "rewrite/unchanged_guard.h"
#include "tools/migrate/batch_filters.h"

namespace remold {
namespace {

// Past this many documents that cannot be converted, the pass stops: the
// rule does not fit the data, and the sweep would carry the list in every
// query.
constexpr size_t kMaxFailures = 10'000;
// Sweeps in a row that convert nothing (every guard lost its race) before
// the pass gives up on what is left.
constexpr int kMaxIdleSweeps = 3;

}  // namespace

PassOutcome RunDocumentPass(BackendClient& backend, Checkpoint& checkpoint,
                            const DocumentConverter& converter, const PassOptions& options,
                            Progress& progress, std::ostream& report) {
  PassOutcome outcome;
  std::vector<Doc> failed_ids;
  bool ordered = true;
  int idle_sweeps = 0;
  const auto start = std::chrono::steady_clock::now();
  Doc options_ordered, options_sweep;
  Doc by_id;
  BSON_APPEND_INT32(by_id.mut(), "_id", 1);
  AppendDoc(options_ordered.mut(), "sort", by_id);
  BSON_APPEND_INT64(options_ordered.mut(), "limit", options.batch);
  BSON_APPEND_INT64(options_sweep.mut(), "limit", options.batch);

  while (true) {
    std::vector<Doc> clauses = {converter.source};
    if (ordered && checkpoint.after) clauses.push_back(After(*checkpoint.after));
    if (!failed_ids.empty()) clauses.push_back(NoneOf(failed_ids));
    const Doc filter = All(std::move(clauses));
    std::vector<Doc> documents;
    backend.Find(checkpoint.ns, filter.get(), (ordered ? options_ordered : options_sweep).get(),
                 [&](DocumentView view) { documents.push_back(Doc::FromBson(view.bson)); });
    if (documents.empty()) {
      if (ordered && !options.dry_run) {
        ordered = false;
        continue;
      }
      break;
    }

    std::vector<Doc> statements;
    for (const Doc& document : documents) {
      std::string why;
      std::optional<Doc> converted = converter.convert(document, &why);
      if (!converted) {
        progress.Clear();
        report << "cannot convert " << IdOf(document.get()).ToRelaxedJson() << ": " << why << "\n";
        failed_ids.push_back(IdOf(document.get()));
        ++outcome.failed;
        continue;
      }
      // Field by field, not the whole document at once: mongo-java-server
      // never finds a document holding an empty array equal to its
      // $literal copy (docs/backends.md); MongoDB compares them equal.
      Doc statement;
      AppendDoc(statement.mut(), "q", UnchangedFields(document));
      AppendDoc(statement.mut(), "u", *converted);
      statements.push_back(std::move(statement));
    }
    int64_t converted_now = static_cast<int64_t>(statements.size());
    if (!options.dry_run && !statements.empty()) {
      BatchUpdateResult result = backend.UpdateBatch(checkpoint.ns, statements);
      converted_now = result.matched;
      for (const std::string& error : result.errors) {
        progress.Clear();
        report << "write failed: " << error << "\n";
      }
    }
    outcome.converted += converted_now;
    checkpoint.converted += options.dry_run ? 0 : converted_now;
    checkpoint.failed += options.dry_run ? 0 : static_cast<int64_t>(documents.size() - statements.size());
    if (ordered) checkpoint.after = IdOf(documents.back().get());
    if (!options.dry_run) SaveCheckpoint(backend, checkpoint, false);
    // A sweep reads again what the ordered pass counted.
    if (ordered) progress.Advance(static_cast<int64_t>(documents.size()));
    if (failed_ids.size() > kMaxFailures) {
      progress.Clear();
      report << "stopping: more than " << kMaxFailures << " documents cannot be converted\n";
      break;
    }
    if (!ordered) {
      idle_sweeps = converted_now == 0 && statements.size() > 0 ? idle_sweeps + 1 : 0;
      if (idle_sweeps >= kMaxIdleSweeps) break;  // every guard keeps losing: left, counted below
    }
    Throttle(options.max_rate, outcome.converted + outcome.failed, start);
  }
  if (!options.dry_run) {
    outcome.left = backend.CountDocuments(checkpoint.ns, converter.source.get(), kCountAll);
    SaveCheckpoint(backend, checkpoint, outcome.left == 0);
  }
  return outcome;
}

}  // namespace remold
