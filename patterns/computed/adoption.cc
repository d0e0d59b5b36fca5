#include <string>
#include <vector>

#include "patterns/computed/migration.h"

namespace remold {
namespace {

// The maintained fields whose absence says a target was never maintained:
// its counts (set by the first source linked), else its sums, else every
// field (an extreme of a field no source holds is absent legitimately).
std::vector<std::string> TellingFields(const ComputedAggregate& aggregate) {
  for (MaintainedField::Op op : {MaintainedField::Op::kCount, MaintainedField::Op::kSum}) {
    std::vector<std::string> fields;
    for (const MaintainedField& field : aggregate.fields)
      if (field.op == op) fields.push_back(field.field);
    if (!fields.empty()) return fields;
  }
  std::vector<std::string> fields;
  for (const MaintainedField& field : aggregate.fields) fields.push_back(field.field);
  return fields;
}

Doc Stage(const char* name, const Doc& body) {
  Doc stage;
  AppendDoc(stage.mut(), name, body);
  return stage;
}

// The link values of the sources, each once, joined to their targets, kept
// where the target misses a telling field (or, with create_target, where
// there is no target yet: remold would have created it).
std::vector<Doc> TargetsWithoutValues(const ComputedAggregate& aggregate) {
  Doc linked, exists;
  BSON_APPEND_BOOL(exists.mut(), "$exists", true);
  Doc condition;
  BSON_APPEND_BOOL(condition.mut(), "$exists", true);
  BSON_APPEND_NULL(condition.mut(), "$ne");
  AppendDoc(linked.mut(), aggregate.link_from, condition);

  Doc group;
  AppendString(group.mut(), "_id", "$" + aggregate.link_from);

  Doc lookup;
  AppendString(lookup.mut(), "from", aggregate.target.collection);
  AppendString(lookup.mut(), "localField", "_id");
  AppendString(lookup.mut(), "foreignField", aggregate.link_to);
  AppendString(lookup.mut(), "as", "target");

  std::vector<Doc> missing;
  for (const std::string& field : TellingFields(aggregate)) {
    Doc absent, clause;
    BSON_APPEND_BOOL(absent.mut(), "$exists", false);
    AppendDoc(clause.mut(), "target." + field, absent);
    missing.push_back(std::move(clause));
  }
  Doc unfilled;
  if (!aggregate.create_target) AppendDoc(unfilled.mut(), "target.0", exists);
  AppendArray(unfilled.mut(), "$or", missing);
  return {Stage("$match", linked), Stage("$group", group), Stage("$lookup", lookup), Stage("$match", unfilled)};
}

}  // namespace

ComputedRule WhileUnconverted(const ComputedRule& rule) {
  ComputedRule serving = rule;
  if (rule.HasLatest()) {
    serving.unfilled_values_left = true;
    return serving;
  }
  serving.migrating = true;
  for (ComputedAggregate& aggregate : serving.aggregates) aggregate.migrating = true;
  return serving;
}

std::string ServingWhileUnconverted(const ComputedRule& rule, const std::string& migrate) {
  if (rule.HasLatest())
    return "writes to " + rule.logical.full() + " are refused (117), since its `latest` fields cannot be "
           "recomputed on write, until `remold reconcile --fix` has filled them";
  return "each write to " + rule.logical.full() + " recomputes the values of the targets it touches from their "
         "sources, as `migrating: true` does, until " + migrate + " has filled them";
}

std::vector<UnconvertedPipeline> UnconvertedPipelines(const ComputedRule& rule) {
  std::vector<UnconvertedPipeline> pipelines;
  for (const ComputedAggregate& aggregate : rule.aggregates) {
    UnconvertedPipeline pipeline{rule.logical, {}, "target(s) in " + aggregate.target.full() +
                                                        " without the values of their documents in " +
                                                        rule.logical.full()};
    if (aggregate.target.db == rule.logical.db) pipeline.stages = TargetsWithoutValues(aggregate);
    pipelines.push_back(std::move(pipeline));
  }
  return pipelines;
}

}  // namespace remold
