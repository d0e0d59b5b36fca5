#include "patterns/history/rule.h"

#include <yaml-cpp/yaml.h>

#include <string>

#include "patterns/array_aside/rule_fields.h"
#include "rules/file_context.h"

namespace remold {

HistoryRule HistoryRule::Parse(const FileContext& ctx, const YAML::Node& h, const Namespace& logical) {
  ctx.CheckKeys(h, "'history'", {"array", "keep", "collection", "migrating"});
  HistoryRule rule;
  rule.logical = logical;
  ctx.Step([&] { rule.array = ParseAsideArray(ctx, h, "'history'", "the top-level array field whose elements are the history"); });
  ctx.Step([&] {
    rule.keep = ParseAsideCount(ctx, h, "'history'", "keep", 0, kMaxKeep, "how many of the latest elements a document keeps embedded");
  });
  ctx.Step([&] { rule.history = ParseAsideCollection(ctx, h, "collection", logical, "history", "history"); });
  ctx.Step([&] { rule.to_flat = ParseMigratingToFlat(ctx, h); });
  return rule;
}

std::vector<WrittenNamespace> HistoryRule::Writes() const {
  WrittenNamespace written{history, [history = history](std::string_view) {
                             return "history collection '" + history.full() +
                                    "' is itself the logical namespace of a rule, expected a plain collection";
                           }};
  // Its documents are found by key alone, and dropped with the collection.
  written.exclusive = true;
  return {written};
}

std::string HistoryRule::Describe() const {
  return logical.full() + "." + array + ": each element in " + history.full() + ", the latest " + std::to_string(keep) +
         " embedded" + (to_flat ? " (migrating to flat: writes store documents whole)" : "");
}

std::string HistoryRule::OnRemoval() const {
  return "documents whose " + array + " went to " + history.full() + " keep only a copy of its latest " +
         std::to_string(keep) + " elements in " + logical.full() + " (a field _remold_history says where the rest "
         "is): before removing the rule, set `migrating: to_flat` and run `remold migrate --to flat`";
}

std::string HistoryRule::OnAddition() const {
  return "documents already in " + logical.full() + " are read as they are; one with elements in " + array +
         " has them stored in " + history.full() + " the next time a write changes it, or by `remold migrate`";
}

std::vector<NamespaceForms> HistoryRule::Forms() const {
  const std::string form = "history " + array + " keep " + std::to_string(keep) + " " + history.full();
  // A plain writer's documents are whole: the rule reads them as they are.
  return {NamespaceForms{logical, form, {form, std::string(kPlainForm)}}};
}

}  // namespace remold
