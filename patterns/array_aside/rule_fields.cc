#include "patterns/array_aside/rule_fields.h"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <string>

#include "rules/file_context.h"
#include "rules/yaml_type.h"

namespace remold {

std::string ParseAsideArray(const FileContext& ctx, const YAML::Node& section, const std::string& where,
                            const std::string& what) {
  std::string array = ctx.String(section, "array", where, what);
  if (ctx.CheckFieldName(section["array"], array, "array field")) {
    if (array == "_id") ctx.Fail(section["array"], "array field '_id' is every document's identity, expected an array field");
    if (array.find('.') != std::string::npos)
      ctx.Fail(section["array"], "array field '" + array + "' is a dotted path, expected a top-level field");
    if (array.starts_with("_remold"))
      ctx.Fail(section["array"], "array field '" + array + "' starts with '_remold', which remold keeps for itself");
  }
  return array;
}

int32_t ParseAsideCount(const FileContext& ctx, const YAML::Node& section, const std::string& where,
                        const std::string& key, int32_t min, int32_t max, const std::string& what) {
  YAML::Node node = section[key];
  const std::string range = std::to_string(min) + ".." + std::to_string(max);
  if (!node) ctx.Fail(section, where + " has no '" + key + "', expected " + what + " (" + range + ")");
  if (TypeOf(node) != YamlType::kInt) ctx.Fail(node, "'" + key + "' is " + Found(node) + ", expected an integer");
  int64_t value = 0;
  const std::string& text = node.Scalar();
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < min || value > max)
    ctx.Fail(node, "'" + key + "' is " + text + ", expected " + range);
  return static_cast<int32_t>(value);
}

Namespace ParseAsideCollection(const FileContext& ctx, const YAML::Node& section, const std::string& key,
                               const Namespace& logical, const std::string& suffix, const std::string& role) {
  const std::string collection = ctx.OptionalString(section, key, logical.collection + "_" + suffix, "a collection name");
  if (collection.empty() || collection.find('$') != std::string::npos || collection == logical.collection ||
      collection.starts_with("system."))
    ctx.Fail(section[key], role + " collection '" + collection + "' must be a collection name other than the logical one");
  return {logical.db, collection};
}

bool ParseMigratingToFlat(const FileContext& ctx, const YAML::Node& section) {
  YAML::Node m = section["migrating"];
  if (!m) return false;
  if (TypeOf(m) != YamlType::kString || m.Scalar() != "to_flat")
    ctx.Fail(m, "'migrating' is " + Found(m) + ", expected to_flat (writes store documents whole, for "
                "`remold migrate --to flat` before the rule is removed)");
  return true;
}

}  // namespace remold
