#include "tools/reconcile/reconcile.h"

#include <optional>
#include <ostream>

#include "ruleset/reconciles.h"
#include "tools/common/backend_client.h"
#include "tools/common/tool_run.h"
#include "tools/reconcile/backend_context.h"

namespace remold {
namespace {

constexpr int kClean = 0;
constexpr int kDriftLeft = 1;

struct Options {
  std::vector<std::string> config_args;  // --config, --backend, --rules, for LoadServeConfig
  std::optional<std::string> rule;
  bool fix = false;
  bool help = false;
};

Options ParseOptions(const std::vector<std::string>& args) {
  Options options;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      options.help = true;
    } else if (arg == "--fix") {
      options.fix = true;
    } else if (arg == "--rule" || arg == "--config" || arg == "--backend" || arg == "--rules") {
      if (i + 1 >= args.size()) throw UsageError(arg + ": expected a value (see remold reconcile --help)");
      if (arg == "--rule") {
        options.rule = args[++i];
      } else {
        options.config_args.push_back(arg);
        options.config_args.push_back(args[++i]);
      }
    } else {
      throw UsageError("unknown argument '" + arg + "' (see remold reconcile --help)");
    }
  }
  return options;
}

// Whether `rule` maintains values or copies that reconciliation checks.
bool Reconciled(const Rule& rule) {
  for (const PatternRule* layer : rule.layers())
    if (IsReconciled(*layer)) return true;
  return false;
}

// "computed, subset and extended reference" (`last` "and"): the patterns
// reconciled.
std::string ReconciledKinds(const std::string& last = "and") {
  const std::vector<std::string> names = ReconciledPatterns();
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == names.size() ? " " + last + " " : ", ") + PatternWords(names[i]);
  }
  return out;
}

std::string ReconciledRuleNames(const RuleSet& rules) {
  std::string names;
  for (const Rule& rule : rules.rules()) {
    if (Reconciled(rule)) names += (names.empty() ? "" : ", ") + rule.name;
  }
  return names.empty() ? "none" : names;
}

// The rules to reconcile: the one named, or every rule of a reconciled
// pattern.
std::vector<const Rule*> SelectRules(const RuleSet& rules, const std::optional<std::string>& name,
                                     const std::string& directory) {
  std::vector<const Rule*> selected;
  for (const Rule& rule : rules.rules()) {
    if (name && rule.name != *name) continue;
    if (name && !Reconciled(rule))
      throw UsageError("rule '" + *name + "' (" + rule.source + ") is " + ARuleOf(rule.pattern_name()) +
                       "; only " + ReconciledKinds() + " rules are reconciled (those rules: " +
                       ReconciledRuleNames(rules) + ")");
    if (Reconciled(rule)) selected.push_back(&rule);
  }
  if (name && selected.empty())
    throw UsageError("no rule named '" + *name + "' in " + directory + " (computed, subset and extended reference rules: " +
                     ReconciledRuleNames(rules) + ")");
  return selected;
}

// What to do: the configuration and the rules, checked before connecting.
struct Plan {
  Config config;
  std::shared_ptr<const RuleSet> rules;
  std::vector<const Rule*> selected;
  bool fix = false;
};

// Throws UsageError or ConfigError; rule file errors are printed to `err`.
Plan Prepare(const Options& options, std::ostream& err) {
  Plan plan;
  plan.fix = options.fix;
  ToolSetup setup = LoadToolSetup(options.config_args, err);
  plan.config = std::move(setup.config);
  plan.rules = std::move(setup.rules);
  plan.selected = SelectRules(*plan.rules, options.rule, plan.config.rules_dir);
  return plan;
}

// Connects, checks every selected rule, prints the summaries and the total.
int Reconcile(const Plan& plan, std::ostream& out, std::ostream& err, bool err_is_terminal) {
  std::unique_ptr<BackendClient> backend = ConnectBackend(plan.config, "remold-reconcile");
  const BackendReconcileContext context(*backend, plan.fix, out, err, err_is_terminal);
  int64_t drifted = 0, fixed = 0;
  for (const Rule* rule : plan.selected) {
    try {
      for (const Summary& summary : ReconcileRule(context, *rule)) {
        out << FormatSummary(summary) << "\n" << std::flush;
        drifted += summary.drifted;
        fixed += summary.fixed;
      }
    } catch (const BackendError& e) {
      throw BackendError("rule " + rule->name + ": backend error: " + e.what());
    }
  }
  out << FormatTotal(drifted, fixed) << "\n" << std::flush;
  return drifted > fixed ? kDriftLeft : kClean;
}

}  // namespace

std::vector<Summary> ReconcileRule(const ReconcileContext& context, const Rule& rule) {
  std::vector<Summary> summaries;
  for (const PatternRule* layer : rule.layers())
    for (Summary& summary : ReconcileLayer(*layer, context, rule.name)) summaries.push_back(std::move(summary));
  return summaries;
}

std::string ReconcileUsage() {
  return "usage: remold reconcile --config FILE [--rule NAME] [--fix]\n"
         "\n"
         "Recomputes every value or copy the " + ReconciledKinds() + " rules\n"
         "maintain, from the source data, and reports the documents that drifted;\n"
         "with --fix, repairs them.\n"
         "\n"
         "flags:\n"
         "  --config FILE   the configuration `remold serve` reads (backend, rules)\n"
         "  --backend URI   override the backend of the file\n"
         "  --rules DIR     override the rules directory of the file\n"
         "  --rule NAME     only the rule of this file stem (default: every rule of\n"
         "                  those patterns)\n"
         "  --fix           repair drifted documents (guarded: a document changed\n"
         "                  meanwhile is left alone and reported)\n"
         "\n"
         "exit status: 0 no drift (or all fixed), 1 drift left, 2 error\n";
}

int RunReconcile(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
                 bool err_is_terminal) {
  const std::string prefix = "remold reconcile: ";
  return RunReportingErrors(prefix, err, [&] {
    Options options = ParseOptions(args);
    if (options.help) {
      out << ReconcileUsage();
      return kClean;
    }
    Plan plan = Prepare(options, err);
    if (plan.selected.empty()) {
      err << prefix << "no " << ReconciledKinds("or") << " rules in " << plan.config.rules_dir << "; nothing to do\n";
      return kClean;
    }
    return Reconcile(plan, out, err, err_is_terminal);
  });
}

}  // namespace remold
