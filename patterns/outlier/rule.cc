#include "patterns/outlier/rule.h"

#include <yaml-cpp/yaml.h>

#include <string>

#include "patterns/array_aside/rule_fields.h"
#include "rules/file_context.h"

namespace remold {

OutlierRule OutlierRule::Parse(const FileContext& ctx, const YAML::Node& o, const Namespace& logical) {
  ctx.CheckKeys(o, "'outlier'", {"array", "threshold", "overflow", "migrating"});
  OutlierRule rule;
  rule.logical = logical;
  ctx.Step([&] { rule.array = ParseAsideArray(ctx, o, "'outlier'", "the top-level array field whose overflow is stored aside"); });
  ctx.Step([&] {
    rule.threshold = ParseAsideCount(ctx, o, "'outlier'", "threshold", 1, kMaxThreshold, "how many elements a document keeps");
  });
  ctx.Step([&] { rule.overflow = ParseAsideCollection(ctx, o, "overflow", logical, "overflow", "overflow"); });
  ctx.Step([&] { rule.to_flat = ParseMigratingToFlat(ctx, o); });
  return rule;
}

std::vector<WrittenNamespace> OutlierRule::Writes() const {
  WrittenNamespace written{overflow, [overflow = overflow](std::string_view) {
                             return "overflow collection '" + overflow.full() +
                                    "' is itself the logical namespace of a rule, expected a plain collection";
                           }};
  // Its pages are found by key alone, and dropped with the collection.
  written.exclusive = true;
  return {written};
}

std::string OutlierRule::Describe() const {
  return logical.full() + "." + array + ": " + std::to_string(threshold) + " embedded, the rest in " + overflow.full() +
         (to_flat ? " (migrating to flat: writes store documents whole)" : "");
}

std::string OutlierRule::OnRemoval() const {
  return "documents whose " + array + " overflowed keep only part of it in " + logical.full() +
         " (the rest is in " + overflow.full() + ", and a field _remold_outlier says where): before removing "
         "the rule, set `migrating: to_flat` and run `remold migrate --to flat`";
}

std::string OutlierRule::OnAddition() const {
  return "documents already in " + logical.full() + " are read as they are; one whose " + array + " has more than " +
         std::to_string(threshold) + " elements is stored in the rule's form the next time a write changes it";
}

std::vector<NamespaceForms> OutlierRule::Forms() const {
  const std::string form = "outlier " + array + ">" + std::to_string(threshold) + " " + overflow.full();
  // A plain writer's documents are whole: the rule reads them as they are.
  return {NamespaceForms{logical, form, {form, std::string(kPlainForm)}}};
}

}  // namespace remold
