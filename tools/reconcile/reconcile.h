// `remold reconcile --config FILE [--rule NAME] [--fix]`: runs the
// reconcile part (patterns/reconcile.h) of every rule whose pattern has
// one: each recomputes the values or copies its rule maintains from the
// source data, reports the documents that drifted and by how much, and
// with --fix repairs them. This file is the loop: options, rules, the
// connection, the totals; it names no pattern.
//
// Reads the same configuration as `remold serve` (backend URI and rules
// directory; --backend and --rules override the file). Report lines go to
// `out` (see patterns/reconcile/drift.h for their format), progress and errors
// to `err` (a bar when `err_is_terminal`, plain lines otherwise).
//
// Exit codes: 0 no drift, or all of it fixed; 1 drift left unfixed;
// 2 usage, configuration, rules or backend errors.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "patterns/reconcile.h"
#include "ruleset/rule.h"

namespace remold {

// Checks (and with context.fix(), repairs) every value one rule
// maintains, layer by layer; one summary per checked collection. Throws
// BackendError.
std::vector<Summary> ReconcileRule(const ReconcileContext& context, const Rule& rule);

int RunReconcile(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
                 bool err_is_terminal);

std::string ReconcileUsage();

}  // namespace remold
