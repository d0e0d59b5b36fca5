#include "tools/migrate/value_fill.h"

#include <chrono>
#include <streambuf>
#include <string>

#include "tools/common/progress.h"
#include "tools/common/tool_run.h"
#include "tools/migrate/checkpoint.h"
#include "tools/reconcile/backend_context.h"
#include "tools/reconcile/reconcile.h"

namespace remold {
namespace {

// Rounds before values that keep changing are left to the next run.
constexpr int kFillRounds = 5;

// Reconcile's line per document goes nowhere: a migration reports counts.
class DiscardingBuffer : public std::streambuf {
 protected:
  int overflow(int c) override { return c; }
};

}  // namespace

int FillValues(const MigrationRequest& request, std::string_view pattern, bool fills_on_write) {
  const Rule& rule = request.rule;
  std::ostream& out = request.out;
  const bool dry_run = request.pass.dry_run;
  if (!request.to_rule())
    throw UsageError("rule '" + rule.name + "' is " + ARuleOf(pattern) +
                     ": its form moves no document (the values it maintains are fields of their "
                     "documents); retired, they stay as they are, no longer maintained. There is nothing to "
                     "migrate back");
  if (request.throttled)
    throw UsageError("--batch and --max-rate apply to rules that move documents; rule '" + rule.name + "' is " +
                     ARuleOf(pattern) + ", whose values are filled by the passes of `remold reconcile --fix`");
  out << "migrate: rule " << rule.name << " (" << pattern << ", " << rule.logical().full()
      << "): filling the values it maintains" << (dry_run ? " (dry run: nothing is written)" : "") << "\n";
  if (!fills_on_write)
    out << "migrate: note: rule '" << rule.name << "' is not migrating: until a value is filled, a write "
        << "through remold adjusts the value stored before the rule (set `migrating: true` in " << rule.source
        << " so that writes recompute what they touch)\n";
  std::unique_ptr<BackendClient> backend = ConnectBackend(request.config, "remold-migrate");
  DiscardingBuffer discard;
  std::ostream quiet(&discard);
  const BackendReconcileContext context(*backend, !dry_run, quiet, request.err, request.err_is_terminal);
  const auto start = std::chrono::steady_clock::now();
  int64_t filled = 0, left = 0;
  for (int round = 1; round <= kFillRounds; ++round) {
    int64_t drifted = 0, fixed = 0;
    for (const Summary& summary : ReconcileRule(context, rule)) {
      out << "migrate: round " << round << ": " << summary.ns << ": " << WithThousands(summary.checked)
          << " checked, " << WithThousands(summary.drifted) << (dry_run ? " to fill" : " differed") << ", "
          << WithThousands(summary.fixed) << " filled\n" << std::flush;
      drifted += summary.drifted;
      fixed += summary.fixed;
    }
    filled += fixed;
    left = drifted - fixed;
    if (dry_run) {
      out << "migrate: dry run: " << WithThousands(drifted) << " value(s) would be filled\n";
      return drifted > 0 ? kMigrationLeft : kMigrationDone;
    }
    if (drifted == 0) break;  // a round that found every value in step
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out << "migrate: filled " << WithThousands(filled) << " document(s) in " << FormatSeconds(seconds) << "; "
      << WithThousands(left) << " left out of step\n";
  // Where `remold serve` sees that the values are filled (app/adoption.h).
  Checkpoint checkpoint = LoadCheckpoint(*backend, rule.name, rule.logical(), MigrationDirection::kToRule);
  checkpoint.converted += filled;
  checkpoint.failed = left;
  SaveCheckpoint(*backend, checkpoint, left == 0);
  if (left == 0) {
    out << "migrate: done: every value rule " << rule.name
        << " maintains is in step with its sources; `migrating: true` can be removed from the rule\n";
    return kMigrationDone;
  }
  out << "migrate: " << WithThousands(left)
      << " document(s) left: their sources kept changing, or a value cannot be computed; run again "
         "(`remold reconcile` names them)\n";
  return kMigrationLeft;
}

}  // namespace remold
