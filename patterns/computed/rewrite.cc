#include "patterns/computed/rewrite.h"

#include <algorithm>

#include "patterns/computed/fields.h"
#include "patterns/computed/maintenance.h"
#include "patterns/source_writes/source_write.h"

namespace remold {
namespace {

// The computed rule as the shared write flows see it: each aggregate is a
// follower; same-document fields are set on the way in and repaired after.
class ComputedSource final : public SourceRule {
 public:
  explicit ComputedSource(const ComputedRule& rule) : rule_(rule) {}

  const Namespace& source() const override { return rule_.logical; }
  std::string Kind() const override { return "a computed rule"; }
  std::vector<std::string> Watched() const override {
    std::vector<std::string> inputs;
    for (const auto& aggregate : rule_.aggregates)
      for (const auto& f : aggregate.inputs)
        if (std::find(inputs.begin(), inputs.end(), f) == inputs.end()) inputs.push_back(f);
    return inputs;
  }
  std::vector<std::unique_ptr<Follower>> Followers(const FollowerContext& context) const override {
    std::vector<std::unique_ptr<Follower>> followers;
    for (const auto& aggregate : rule_.aggregates)
      followers.push_back(std::make_unique<AggregateMaintenance>(aggregate, rule_.logical, context.client,
                                                                 context.warnings, context.abort));
    return followers;
  }

  std::vector<std::string> FollowUps(const std::string& name) const override {
    std::vector<std::string> lines;
    if (name != "insert" && (name != "delete" || !rule_.aggregates.empty()))
      lines.push_back(
          "each document matched is changed by findAndModify (new: false), so what it held before is known");
    for (const ComputedAggregate& a : rule_.aggregates) {
      const std::string target = a.target.full();
      if (a.migrating) {
        lines.push_back(target + ": each target touched recomputed from its sources ($group), set where it "
                                 "still holds what was read, and read again until they agree");
      } else if (name == "insert") {
        lines.push_back(target + ": one update adding what the documents bring ($inc of counts and sums, "
                                 "$max/$min of their values), one statement per target; latest values set "
                                 "where the target's max is the new document's, then checked");
      } else {
        lines.push_back(target + ": one update of what the documents took away and brought ($inc, $max/$min); "
                                 "an extreme they may have held is read again from the source (sorted, limit "
                                 "1) and set where the target still holds it, then read again");
      }
      if (!a.derived.empty())
        lines.push_back(target + ": the derived fields read, computed and set where the values they were "
                                 "computed from are unchanged");
    }
    if (!rule_.fields.empty() && name != "insert" && name != "delete")
      lines.push_back(rule_.logical.full() + ": the computed fields of the documents changed read, computed "
                                             "and set where their inputs are unchanged");
    return lines;
  }
  std::vector<std::string> DocumentFieldsWatched() const override {
    if (rule_.fields.empty()) return {};
    std::vector<std::string> watched = ComputedInputs(rule_);
    for (const auto& f : rule_.fields) watched.push_back(f.field);
    return watched;
  }
  std::optional<Refusal> PrepareInsert(const bson_t* doc, Doc& out, const Doc*) const override {
    if (rule_.fields.empty()) return std::nullopt;
    return WithComputedFields(rule_, doc, out);
  }
  std::optional<Refusal> PrepareUpdate(const ClientUpdate& update, ClientUpdate& out) const override {
    return ::remold::PrepareUpdate(rule_, update, out);
  }
  void ScheduleRepair(CommandQueue& queue, const FollowerContext& context,
                      std::vector<Doc> ids) const override {
    ScheduleComputedRepair(queue, rule_, context.client, std::move(ids), context.warnings, context.abort);
  }

 private:
  ComputedRule rule_;
};

std::string DropRefusal(const std::string& rule_name, const ComputedRule& rule) {
  std::string targets;
  for (const auto& aggregate : rule.aggregates)
    targets += (targets.empty() ? "" : ", ") + aggregate.target.full();
  return "computed rule '" + rule_name + "' for " + rule.logical.full() +
         ": drop of a source that still has documents is not supported: the fields it maintains in " +
         targets +
         " would keep counting them. Delete the documents first (deleteMany({}) is maintained), then drop";
}

}  // namespace

std::optional<Plan> RewritePattern(const Command& command, const RuleContext& base, const ComputedRule& rule,
                                   const Capabilities&) {
  const std::string& name = command.name;
  if (name == "drop") {
    // Same-document fields live in the dropped documents themselves: with
    // no aggregates the drop goes to the backend unchanged.
    if (rule.aggregates.empty()) return std::nullopt;
    return FollowedDrop(command, rule.logical, DropRefusal(base.name, rule));
  }
  if (name != "insert" && name != "delete" && name != "update" && name != "findAndModify" &&
      name != "findandmodify")
    return std::nullopt;
  if (rule.unfilled_values_left)
    return ImmediateReply(ErrorReply(
        error_codes::kConflictingOperationInProgress,
        "computed rule '" + base.name + "' for " + rule.logical.full() + ": " + name +
            " is refused while targets that documents of " + rule.logical.full() +
            " link to hold no values yet: the rule's `latest` fields cannot be recomputed on write. "
            "`remold reconcile --fix` fills them (the rule's `migrating: false` says every value is "
            "filled already)"));
  auto source = std::make_shared<const ComputedSource>(rule);
  if (name == "insert") return FollowedInsert(command, source);
  if (name == "delete") return FollowedDelete(command, source);
  if (name == "update") return FollowedUpdate(command, source);
  return FollowedFindAndModify(command, source);
}

std::vector<Doc> ViewStages(const ComputedRule&) { return {}; }

}  // namespace remold
