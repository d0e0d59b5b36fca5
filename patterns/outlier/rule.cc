#include "patterns/outlier/rule.h"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <string>

#include "rules/file_context.h"
#include "rules/yaml_type.h"

namespace remold {

OutlierRule OutlierRule::Parse(const FileContext& ctx, const YAML::Node& o, const Namespace& logical) {
  ctx.CheckKeys(o, "'outlier'", {"array", "threshold", "overflow", "migrating"});
  OutlierRule rule;
  rule.logical = logical;
  ctx.Step([&] {
    rule.array = ctx.String(o, "array", "'outlier'", "the top-level array field whose overflow is stored aside");
    if (ctx.CheckFieldName(o["array"], rule.array, "array field")) {
      if (rule.array == "_id") ctx.Fail(o["array"], "array field '_id' is every document's identity, expected an array field");
      if (rule.array.find('.') != std::string::npos)
        ctx.Fail(o["array"], "array field '" + rule.array + "' is a dotted path, expected a top-level field");
      if (rule.array.starts_with("_remold"))
        ctx.Fail(o["array"], "array field '" + rule.array + "' starts with '_remold', which remold keeps for itself");
    }
  });
  ctx.Step([&] {
    YAML::Node t = o["threshold"];
    const std::string range = std::to_string(1) + ".." + std::to_string(kMaxThreshold);
    if (!t) ctx.Fail(o, "'outlier' has no 'threshold', expected how many elements a document keeps (" + range + ")");
    if (TypeOf(t) != YamlType::kInt) ctx.Fail(t, "'threshold' is " + Found(t) + ", expected an integer");
    int64_t threshold = 0;
    const std::string& text = t.Scalar();
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), threshold);
    if (ec != std::errc() || end != text.data() + text.size() || threshold < 1 || threshold > kMaxThreshold)
      ctx.Fail(t, "'threshold' is " + text + ", expected " + range);
    rule.threshold = static_cast<int32_t>(threshold);
  });
  ctx.Step([&] {
    const std::string collection = ctx.OptionalString(o, "overflow", logical.collection + "_overflow", "a collection name");
    if (collection.empty() || collection.find('$') != std::string::npos || collection == logical.collection ||
        collection.starts_with("system."))
      ctx.Fail(o["overflow"], "overflow collection '" + collection + "' must be a collection name other than the logical one");
    rule.overflow = {logical.db, collection};
  });
  if (YAML::Node m = o["migrating"]) {
    ctx.Step([&] {
      if (TypeOf(m) != YamlType::kString || m.Scalar() != "to_flat")
        ctx.Fail(m, "'migrating' is " + Found(m) + ", expected to_flat (writes store documents whole, for "
                    "`remold migrate --to flat` before the rule is removed)");
      rule.to_flat = true;
    });
  }
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
