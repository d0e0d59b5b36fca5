#include "tools/migrate/value_fill.h"

#include <chrono>
#include <cstdio>
#include <streambuf>

#include "tools/common/progress.h"
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

int FillValues(BackendClient& backend, const Rule& rule, bool dry_run, std::ostream& out, std::ostream& err,
               bool err_is_terminal) {
  DiscardingBuffer discard;
  std::ostream quiet(&discard);
  const CheckContext context{backend, !dry_run, quiet, err, err_is_terminal};
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
      return drifted > 0 ? 1 : 0;
    }
    if (drifted == 0) break;  // a round that found every value in step
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  char elapsed[32];
  std::snprintf(elapsed, sizeof elapsed, "%.1f s", seconds);
  out << "migrate: filled " << WithThousands(filled) << " document(s) in " << elapsed << "; "
      << WithThousands(left) << " left out of step\n";
  if (left == 0) {
    out << "migrate: done: every value rule " << rule.name
        << " maintains is in step with its sources; `migrating: true` can be removed from the rule\n";
    return 0;
  }
  out << "migrate: " << WithThousands(left)
      << " document(s) left: their sources kept changing, or a value cannot be computed; run again "
         "(`remold reconcile` names them)\n";
  return 1;
}

}  // namespace remold
