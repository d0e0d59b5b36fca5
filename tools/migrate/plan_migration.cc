#include "tools/migrate/plan_migration.h"

#include <chrono>
#include <memory>
#include <stdexcept>

#include "rewrite/plan_runner.h"
#include "tools/common/tool_run.h"
#include "tools/migrate/checkpoint.h"

namespace remold {
namespace {

// Rounds in a row that store nothing before the rest is left to another run.
constexpr int kIdleRounds = 3;

// Runs `plan` on `backend` as the proxy runs a client's plan; its reply.
Doc RunPlan(BackendClient& backend, Plan plan) {
  PlanRunner runner(std::move(plan));
  while (const BackendCommand* command = runner.Next()) {
    Doc body;
    std::string db;
    const Doc folded = FoldedCommand(*command);
    bson_iter_t it;
    bson_iter_init(&it, folded.get());
    while (bson_iter_next(&it)) {
      if (std::string_view(bson_iter_key(&it)) == "$db") db = bson_iter_utf8(&it, nullptr);
      else AppendValue(body.mut(), bson_iter_key(&it), it);
    }
    runner.Accept(backend.Reply(db, body));
  }
  return runner.Finish().reply;
}

}  // namespace

int MigrateByPlans(const MigrationRequest& request, std::string_view pattern, const std::string& source,
                   const std::function<Plan()>& round) {
  const Rule& rule = request.rule;
  std::ostream& out = request.out;
  const bool dry_run = request.pass.dry_run;
  if (request.throttled)
    throw UsageError("--batch and --max-rate do not apply to rule '" + rule.name + "' (" + ARuleOf(pattern) +
                     "): it migrates in rounds of its own writes");
  std::optional<Doc> filter = Doc::FromJson(source);
  if (!filter) throw std::logic_error("rule '" + rule.name + "': bad migration filter " + source);
  const std::string form = request.to_rule() ? "the rule's form" : "the flat form (whole)";
  out << "migrate: rule " << rule.name << " (" << pattern << ", " << rule.logical().full() << "): into " << form
      << (dry_run ? " (dry run: nothing is written)" : "") << "\n";
  std::unique_ptr<BackendClient> backend = ConnectBackend(request.config, "remold-migrate");
  const auto start = std::chrono::steady_clock::now();
  int64_t left = backend->CountDocuments(rule.logical(), filter->get(), kCountAll);
  if (dry_run) {
    out << "migrate: dry run: " << WithThousands(left) << " document(s) would be stored in " << form << "\n";
    return left > 0 ? kMigrationLeft : kMigrationDone;
  }
  int64_t stored = 0;
  for (int idle = 0; left > 0 && idle < kIdleRounds;) {
    const Doc reply = RunPlan(*backend, round());
    if (!IsOkReply(reply))
      throw BackendError("a round failed: " + FindString(reply.get(), "errmsg").value_or("no message"),
                         static_cast<int32_t>(FindInteger(reply.get(), "code").value_or(0)));
    const int64_t now = backend->CountDocuments(rule.logical(), filter->get(), kCountAll);
    if (now < left) {
      stored += left - now;
      idle = 0;
    } else {
      ++idle;
    }
    left = now;
    request.err << "migrate: " << WithThousands(stored) << " stored, " << WithThousands(left) << " left\n";
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out << "migrate: stored " << WithThousands(stored) << " document(s) in " << form << " in "
      << FormatSeconds(seconds) << "; " << WithThousands(left) << " left\n";
  // Where `remold serve` and `remold check` see the migration's state.
  Checkpoint checkpoint = LoadCheckpoint(*backend, rule.name, rule.logical(), request.direction);
  checkpoint.converted += stored;
  checkpoint.failed = left;
  SaveCheckpoint(*backend, checkpoint, left == 0);
  if (left == 0) {
    out << "migrate: done: every document of " << rule.logical().full() << " is in " << form
        << (request.to_rule() ? "" : "; the rule can be removed (the collection it wrote besides then holds only "
                                     "documents no document names: drop it)")
        << "\n";
    return kMigrationDone;
  }
  out << "migrate: " << WithThousands(left) << " document(s) left: they kept changing; run again\n";
  return kMigrationLeft;
}

}  // namespace remold
