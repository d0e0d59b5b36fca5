#include "engine/engine.h"

#include <memory>
#include <vector>

#include "engine/catalog.h"
#include "engine/indirect_references.h"
#include "engine/rewrites.h"
#include "rewrite/command_namespace.h"
#include "rewrite/stacked_plan.h"

namespace remold {
namespace {

// Inside a transaction only the first command may carry startTransaction
// and readConcern; later commands of the same plan continue it.
void Continue(BackendCommand& command) {
  Doc& body = command.body;
  if (!Find(body.get(), "startTransaction")) return;
  Doc trimmed;
  bson_copy_to_excluding_noinit(body.get(), trimmed.mut(), "startTransaction", "readConcern",
                                nullptr);
  body = std::move(trimmed);
}

Continuation ContinuedAfter(Continuation then) {
  return [then = std::move(then)](std::span<const Doc> replies) {
    Step step = then(replies);
    for (BackendCommand& command : step.commands) Continue(command);
    if (step.then) step.then = ContinuedAfter(std::move(step.then));
    return step;
  };
}

void ContinueTransaction(Plan& plan) {
  for (size_t i = 1; i < plan.commands.size(); ++i) Continue(plan.commands[i]);
  // What follows is never first.
  if (plan.then && !plan.commands.empty()) plan.then = ContinuedAfter(std::move(plan.then));
}

std::optional<Plan> RewriteCommand(const Command& command, const RuleSet& rules,
                                   const Capabilities& caps);

// The plan of `rule`'s layer `depth` (rule.h: 0 is the top), run through
// the layers below it (rewrite/stacked_plan.h). A command the layer leaves
// as it is goes to the layers below as the client sent it.
std::optional<Plan> RewriteLayer(const Command& command, const Rule& rule, size_t depth,
                                 const Capabilities& caps) {
  const std::vector<const PatternRule*> layers = rule.layers();
  if (depth >= layers.size()) return std::nullopt;
  std::optional<Plan> plan = std::visit(
      [&](const auto& pattern) { return RewritePattern(command, rule, pattern, caps); }, *layers[depth]);
  if (depth + 1 == layers.size()) return plan;
  if (!plan) return RewriteLayer(command, rule, depth + 1, caps);
  // The stacked plan outlives this call: it keeps its own copy of the rule.
  // A command of the upper plan on another collection (a subset's parent)
  // is none of the lower rule's: it goes as it is.
  auto owned = std::make_shared<const Rule>(rule);
  return StackedPlan(std::move(*plan), [owned, depth, caps](const Command& lower) -> std::optional<Plan> {
    std::optional<CommandNamespace> ns = ResolveNamespace(lower.name, lower.body.get());
    if (!ns || !ns->collection || ns->db != owned->logical().db || *ns->collection != owned->logical().collection)
      return std::nullopt;
    return RewriteLayer(lower, *owned, depth + 1, caps);
  });
}

// The plan of the rule of the collection `command` addresses, if any.
std::optional<Plan> RewriteForTarget(const Command& command, const RuleSet& rules,
                                     const Capabilities& caps) {
  std::optional<CommandNamespace> ns = ResolveNamespace(command.name, command.body.get());
  if (!ns || !ns->collection) return std::nullopt;
  // dataSize names another database; a watched collection reaches its watcher.
  const Rule* rule = rules.FindForCommand(ns->db, *ns->collection);
  if (!rule) return std::nullopt;
  std::optional<Plan> plan = RewriteLayer(command, *rule, 0, caps);
  if (plan) plan->rule = rule->name;
  return plan;
}

// {explain: <command>, verbosity}: explains the backend command the
// rewrite of <command> would run, when it is a single read.
std::optional<Plan> RewriteExplain(const Command& command, const RuleSet& rules,
                                   const Capabilities& caps) {
  std::optional<Doc> inner_body = FindDocument(command.body.get(), "explain");
  if (!inner_body) return std::nullopt;
  std::optional<Command> parsed = CommandFromDocument(*inner_body, command.db);
  if (!parsed) return std::nullopt;
  const Command& inner = *parsed;
  std::optional<Plan> plan = RewriteCommand(inner, rules, caps);
  if (!plan) return std::nullopt;
  if (plan->immediate_reply) return plan;
  if (plan->commands.size() != 1 || !plan->commands[0].sequence_id.empty() || plan->then ||
      inner.name == "insert" || inner.name == "delete") {
    Plan refused;
    refused.rule = plan->rule;
    refused.immediate_reply = ErrorReply(error_codes::kCommandNotSupported,
        "explain of '" + inner.name + "' is not supported on a namespace with a rule; try "
        "`remold explain` to see the backend commands");
    return refused;
  }
  Doc inner_backend;
  bson_copy_to_excluding_noinit(plan->commands[0].body.get(), inner_backend.mut(), "$db", "lsid",
                                "$clusterTime", "$readPreference", nullptr);
  Plan wrapped;
  wrapped.rule = plan->rule;
  BackendCommand explain;
  AppendDoc(explain.body.mut(), "explain", inner_backend);
  if (auto verbosity = Find(command.body.get(), "verbosity"))
    AppendValue(explain.body.mut(), "verbosity", *verbosity);
  SealCommand(command, ArgumentTarget::kRead, command.db, explain.body.mut());
  wrapped.commands.push_back(std::move(explain));
  wrapped.shape = [](std::span<const Doc> replies) { return ShapedReply{replies.front(), {}, {}, {}, {}, {}}; };
  return wrapped;
}

std::optional<Plan> RewriteCommand(const Command& command, const RuleSet& rules,
                                   const Capabilities& caps) {
  if (command.name == "explain") return RewriteExplain(command, rules, caps);
  if (command.name == "listCollections") return ListCollectionsPlan(command, rules);
  IndirectPlan indirect = PlanIndirectReferences(command, rules);
  if (indirect.refusal) return std::move(indirect.refusal);
  const Command& effective = indirect.rewritten ? *indirect.rewritten : command;
  if (!indirect.forward) {
    if (std::optional<Plan> plan = RewriteForTarget(effective, rules, caps)) {
      for (BackendCommand& ensure : indirect.prerequisites) plan->ensure.push_back(std::move(ensure));
      return plan;
    }
  }
  if (!indirect.rewritten) return std::nullopt;
  Plan forwarded = ForwardPlan(*indirect.rewritten);
  forwarded.rule = indirect.rule;
  forwarded.ensure = std::move(indirect.prerequisites);
  return forwarded;
}

}  // namespace

bool MayConcernRulesElsewhere(std::string_view command) {
  return command == "explain" || command == "listCollections" || MayReferenceOthers(command);
}

std::optional<Plan> Rewrite(const Command& command, const RuleSet& rules, const Capabilities& caps) {
  if (rules.empty()) return std::nullopt;
  std::optional<Plan> plan = RewriteCommand(command, rules, caps);
  if (plan) ContinueTransaction(*plan);
  return plan;
}

}  // namespace remold
