#include "app/explain.h"

#include <optional>
#include <ostream>

#include "app/unconverted_data.h"
#include "config/backend_credentials.h"
#include "config/config.h"
#include "engine/engine.h"
#include "proxy/wire/backend_uri.h"
#include "ruleset/loader.h"
#include "tools/common/backend_client.h"

namespace remold {
namespace {

std::string Display(const BackendCommand& command) { return FoldedCommand(command).ToRelaxedJson(); }

// `remold check --backend`: the documents written before each rule that
// are not in its form. 0 when there are none, 1 otherwise.
int CheckBackendData(const RuleSet& rules, const std::string& backend_uri, const std::string& credentials_file,
                     std::ostream& out, std::ostream& err) {
  std::string error;
  std::optional<BackendOptions> backend = ParseBackendUri(backend_uri, error);
  if (!backend) {
    err << "remold check: " << error << "\n";
    return 2;
  }
  BackendIdentity identity;
  try {
    identity = LoadBackendIdentity(credentials_file, ProcessEnvironment);
  } catch (const ConfigError& e) {
    err << "remold check: " << e.what() << "\n";
    return 2;
  }
  size_t unconverted = 0;
  try {
    BackendClient client(*backend, identity, "remold-check");
    for (const UnconvertedProbe& probe : UnconvertedProbes(rules)) {
      if (probe.stages.empty()) {
        ++unconverted;
        out << "rule '" << probe.rule << "' (" << probe.pattern << ", " << probe.ns.full() << "): the " << probe.what
            << " cannot be counted (a $lookup cannot reach another database): check them with `remold reconcile`\n";
        continue;
      }
      const int64_t count = client.CountPipeline(probe.ns, probe.stages, kUnconvertedCountLimit);
      if (count == 0) {
        out << "rule '" << probe.rule << "' (" << probe.pattern << ", " << probe.ns.full()
            << "): no " << (probe.what == "document(s)" ? "document written before the rule" : probe.what) << "\n";
        continue;
      }
      ++unconverted;
      out << DescribeUnconverted(probe, count) << "\n";
    }
  } catch (const BackendError& e) {
    err << "remold check: backend: " << e.what() << "\n";
    return 1;
  }
  if (unconverted == 0) return 0;
  out << "remold check: " << unconverted << " rule(s) have documents written before them\n";
  return 1;
}

}  // namespace

int RunCheck(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::string dir, backend_uri, credentials_file;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--backend" && i + 1 < args.size()) {
      backend_uri = args[++i];
    } else if (args[i] == "--backend-credentials" && i + 1 < args.size()) {
      credentials_file = args[++i];
    } else if (dir.empty() && args[i].rfind("--", 0) != 0) {
      dir = args[i];
    } else {
      err << "usage: remold check DIR [--backend URI [--backend-credentials FILE]]\n";
      return 2;
    }
  }
  if (dir.empty()) {
    err << "usage: remold check DIR [--backend URI [--backend-credentials FILE]]\n";
    return 2;
  }
  RuleLoadResult result = LoadRuleDirectory(dir);
  for (const auto& error : result.errors) err << error << "\n";
  if (!result.errors.empty()) {
    err << "remold check: " << result.errors.size() << " error(s) in " << dir << "\n";
    return 1;
  }
  for (const Rule& rule : result.rules->rules()) {
    std::string description = rule.Describe();
    out << rule.source << ": " << rule.pattern_name() << " rule '" << rule.name
        << "': " << description << "\n";
  }
  out << "remold check: " << result.rules->rules().size() << " rule(s) OK in " << dir << "\n";
  if (backend_uri.empty()) return 0;
  return CheckBackendData(*result.rules, backend_uri, credentials_file, out, err);
}

int RunExplain(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::string rules_dir, db, json;
  for (size_t i = 0; i < args.size(); ++i) {
    if ((args[i] == "--rules" || args[i] == "--db") && i + 1 < args.size()) {
      (args[i] == "--rules" ? rules_dir : db) = args[i + 1];
      ++i;
    } else if (json.empty()) {
      json = args[i];
    } else {
      err << "remold explain: unexpected argument '" << args[i] << "'\n";
      return 2;
    }
  }
  if (rules_dir.empty() || json.empty()) {
    err << "usage: remold explain --rules DIR [--db DB] '<command as Extended JSON>'\n";
    return 2;
  }
  RuleLoadResult rules = LoadRuleDirectory(rules_dir);
  for (const auto& error : rules.errors) err << error << "\n";
  if (!rules.errors.empty()) return 1;
  std::string parse_error;
  std::optional<Doc> body = Doc::FromJson(json, &parse_error);
  if (!body || body->empty()) {
    err << "remold explain: the command is not an Extended JSON document: " << parse_error << "\n";
    return 2;
  }
  std::optional<Command> command = CommandFromDocument(*body, db);
  if (!command) {
    err << "remold explain: give --db DB or a \"$db\" field\n";
    return 2;
  }

  std::optional<Plan> plan = Rewrite(*command, *rules.rules, Capabilities{});
  if (!plan) {
    out << "no rule applies: forwarded to the backend unchanged\n";
    return 0;
  }
  out << "rule: " << plan->rule << "\n";
  if (plan->immediate_reply) {
    out << "answered by remold without the backend:\n  " << plan->immediate_reply->ToRelaxedJson()
        << "\n";
    return 0;
  }
  for (const auto& ensure : plan->ensure)
    out << "ensure (once per process):\n  " << Display(ensure) << "\n";
  for (size_t i = 0; i < plan->commands.size(); ++i)
    out << "command " << i + 1 << ":\n  " << Display(plan->commands[i]) << "\n";
  if (plan->then && plan->follow_ups.empty())
    out << "then: further commands that depend on the replies (the documents found, the values "
           "they held), run with --log-level debug to see them\n";
  if (plan->then && !plan->follow_ups.empty()) {
    out << "then, depending on the replies (--log-level debug shows the commands sent):\n";
    for (const std::string& line : plan->follow_ups) out << "  - " << line << "\n";
  }
  return 0;
}

}  // namespace remold
