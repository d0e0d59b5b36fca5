#include "rewrite/engine.h"

#include "rewrite/bucket.h"

namespace remold {
namespace {

// Inside a transaction only the first command may carry startTransaction
// and readConcern; later commands of the same plan continue it.
void ContinueTransaction(Plan& plan) {
  for (size_t i = 1; i < plan.commands.size(); ++i) {
    Doc& body = plan.commands[i].body;
    if (!Find(body.get(), "startTransaction")) continue;
    Doc trimmed;
    bson_copy_to_excluding_noinit(body.get(), trimmed.mut(), "startTransaction", "readConcern",
                                  nullptr);
    body = std::move(trimmed);
  }
}

}  // namespace

std::optional<Plan> Rewrite(const Command& command, const RuleSet& rules, const Capabilities& caps) {
  if (rules.empty()) return std::nullopt;
  std::optional<std::string> collection = TargetCollection(command);
  if (!collection) return std::nullopt;
  const Rule* rule = rules.Find(command.db, *collection);
  if (!rule) return std::nullopt;
  Plan plan = std::visit(
      [&](const auto& pattern) { return RewriteBucket(command, *rule, pattern, caps); },
      rule->pattern);
  plan.rule = rule->name;
  ContinueTransaction(plan);
  return plan;
}

}  // namespace remold
