#include "patterns/history/rule.h"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <string>

#include "rules/file_context.h"
#include "rules/yaml_type.h"

namespace remold {

HistoryRule HistoryRule::Parse(const FileContext& ctx, const YAML::Node& h, const Namespace& logical) {
  ctx.CheckKeys(h, "'history'", {"array", "keep", "collection", "migrating"});
  HistoryRule rule;
  rule.logical = logical;
  ctx.Step([&] {
    rule.array = ctx.String(h, "array", "'history'", "the top-level array field whose elements are the history");
    if (ctx.CheckFieldName(h["array"], rule.array, "array field")) {
      if (rule.array == "_id") ctx.Fail(h["array"], "array field '_id' is every document's identity, expected an array field");
      if (rule.array.find('.') != std::string::npos)
        ctx.Fail(h["array"], "array field '" + rule.array + "' is a dotted path, expected a top-level field");
      if (rule.array.starts_with("_remold"))
        ctx.Fail(h["array"], "array field '" + rule.array + "' starts with '_remold', which remold keeps for itself");
    }
  });
  ctx.Step([&] {
    YAML::Node k = h["keep"];
    const std::string range = "0.." + std::to_string(kMaxKeep);
    if (!k) ctx.Fail(h, "'history' has no 'keep', expected how many of the latest elements a document keeps embedded (" + range + ")");
    if (TypeOf(k) != YamlType::kInt) ctx.Fail(k, "'keep' is " + Found(k) + ", expected an integer");
    int64_t keep = -1;
    const std::string& text = k.Scalar();
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), keep);
    if (ec != std::errc() || end != text.data() + text.size() || keep < 0 || keep > kMaxKeep)
      ctx.Fail(k, "'keep' is " + text + ", expected " + range);
    rule.keep = static_cast<int32_t>(keep);
  });
  ctx.Step([&] {
    const std::string collection = ctx.OptionalString(h, "collection", logical.collection + "_history", "a collection name");
    if (collection.empty() || collection.find('$') != std::string::npos || collection == logical.collection ||
        collection.starts_with("system."))
      ctx.Fail(h["collection"], "history collection '" + collection + "' must be a collection name other than the logical one");
    rule.history = {logical.db, collection};
  });
  if (YAML::Node m = h["migrating"]) {
    ctx.Step([&] {
      if (TypeOf(m) != YamlType::kString || m.Scalar() != "to_flat")
        ctx.Fail(m, "'migrating' is " + Found(m) + ", expected to_flat (writes store documents whole, for "
                    "`remold migrate --to flat` before the rule is removed)");
      rule.to_flat = true;
    });
  }
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
