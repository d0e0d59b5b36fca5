#include "patterns/attribute/rule.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>

#include "rules/file_context.h"

namespace remold {

bool AttributeRule::IsAttribute(std::string_view field) const {
  if (!fields.empty()) return std::find(fields.begin(), fields.end(), field) != fields.end();
  if (field == "_id" || field == array_field || field.empty() || field[0] == '$') return false;
  return std::find(except.begin(), except.end(), field) == except.end();
}

AttributeRule AttributeRule::Parse(const FileContext& ctx, const YAML::Node& a,
                                   const Namespace& logical) {
  ctx.CheckKeys(a, "'attribute'",
                {"array", "key", "value", "fields", "except", "unfold", "fix_elem_match"});
  AttributeRule rule;
  rule.logical = logical;
  rule.array_field = ctx.OptionalString(a, "array", "specs");
  ctx.CheckFieldName(a["array"] ? a["array"] : a, rule.array_field, "array");
  rule.key_name = ctx.OptionalString(a, "key", "k");
  ctx.CheckFieldName(a["key"] ? a["key"] : a, rule.key_name, "key");
  rule.value_name = ctx.OptionalString(a, "value", "v");
  ctx.CheckFieldName(a["value"] ? a["value"] : a, rule.value_name, "value");
  if (rule.key_name == rule.value_name)
    ctx.Fail(a["value"] ? a["value"] : a, "'key' and 'value' must be different names");
  rule.fields = ctx.StringList(a, "fields");
  rule.except = ctx.StringList(a, "except");
  if (bool(a["fields"]) == bool(a["except"]))
    ctx.Fail(a, "give either 'fields' (the attributes) or 'except' (the fixed fields), not both "
                "and not neither");
  if (a["fields"] && rule.fields.empty())
    ctx.Fail(a["fields"], "'fields' must list at least one attribute");
  for (const auto& f : rule.fields) {
    ctx.CheckFieldName(a["fields"], f, "attribute field");
    if (f == "_id" || f == rule.array_field)
      ctx.Fail(a["fields"], "'" + f + "' cannot be an attribute");
  }
  for (const auto& f : rule.except) ctx.CheckFieldName(a["except"], f, "fixed field");
  rule.unfold = ParseBool(ctx, a, "unfold", true);
  rule.fix_elem_match = ParseBool(ctx, a, "fix_elem_match", true);
  return rule;
}

std::string AttributeRule::Describe() const {
  return logical.full() + " (array '" + array_field + "')";
}

}  // namespace remold
