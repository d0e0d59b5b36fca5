#include "app/explain.h"

#include <ostream>

#include "rewrite/engine.h"
#include "rules/loader.h"

namespace remold {
namespace {

std::string Display(const BackendCommand& command) { return FoldedCommand(command).ToRelaxedJson(); }

}  // namespace

int RunCheck(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.size() != 1) {
    err << "usage: remold check DIR\n";
    return 2;
  }
  RuleLoadResult result = LoadRuleDirectory(args[0]);
  for (const auto& error : result.errors) err << error << "\n";
  if (!result.errors.empty()) {
    err << "remold check: " << result.errors.size() << " error(s) in " << args[0] << "\n";
    return 1;
  }
  for (const Rule& rule : result.rules->rules()) {
    std::string description =
        std::visit([](const auto& pattern) { return pattern.Describe(); }, rule.pattern);
    out << rule.source << ": " << rule.pattern_name() << " rule '" << rule.name
        << "': " << description << "\n";
  }
  out << "remold check: " << result.rules->rules().size() << " rule(s) OK in " << args[0] << "\n";
  return 0;
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
  if (plan->then)
    out << "then: further commands that depend on the replies (the documents found, the values "
           "they held), run with --log-level debug to see them\n";
  return 0;
}

}  // namespace remold
