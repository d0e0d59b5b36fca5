#include "patterns/attribute/rule.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>

#include "common/doc.h"
#include "rules/file_context.h"

namespace remold {

bool AttributeRule::IsAttribute(std::string_view field) const {
  if (!fields.empty()) return std::find(fields.begin(), fields.end(), field) != fields.end();
  if (field == "_id" || field == array_field || field.empty() || field[0] == '$') return false;
  return std::find(except.begin(), except.end(), field) == except.end();
}

namespace {

// `migrating`: true or to_rule, to_flat, false (or absent).
std::optional<MigrationDirection> ParseMigrating(const FileContext& ctx, const YAML::Node& node) {
  if (!node) return std::nullopt;
  const std::string text = node.IsScalar() ? node.Scalar() : "";
  if (TypeOf(node) == YamlType::kBool)
    return text[0] == 't' || text[0] == 'T' ? std::optional(MigrationDirection::kToRule) : std::nullopt;
  if (text == "to_rule") return MigrationDirection::kToRule;
  if (text == "to_flat") return MigrationDirection::kToFlat;
  ctx.Fail(node, "'migrating' is " + Found(node) + ", expected true (or to_rule), to_flat or false");
  return std::nullopt;
}

}  // namespace

// Each key is read in a Step of its own, so every mistake is reported; a
// check that combines keys runs only when those keys were read.
AttributeRule AttributeRule::Parse(const FileContext& ctx, const YAML::Node& a,
                                   const Namespace& logical) {
  ctx.CheckKeys(a, "'attribute'",
                {"array", "key", "value", "fields", "except", "unfold", "fix_elem_match", "migrating"});
  AttributeRule rule;
  rule.logical = logical;
  // One of the pair names: `key` is the YAML key, `fallback` its default.
  auto name = [&](const std::string& key, const std::string& fallback, std::string& out) {
    return ctx.Step([&] {
      out = ctx.OptionalString(a, key, fallback, "a field name");
      if (a[key]) ctx.CheckFieldName(a[key], out, key);
    });
  };
  bool array_ok = name("array", "specs", rule.array_field);
  bool key_ok = name("key", "k", rule.key_name);
  bool value_ok = name("value", "v", rule.value_name);
  if (key_ok && value_ok && rule.key_name == rule.value_name) {
    if (a["key"] && a["value"])
      ctx.Report(a["value"], "'key' and 'value' are both '" + rule.key_name +
                                 "', expected two different names");
    else if (a["key"])
      ctx.Report(a["key"], "'key' is '" + rule.key_name +
                               "', the value's default name, expected another name");
    else
      ctx.Report(a["value"], "'value' is '" + rule.value_name +
                                 "', the key's default name, expected another name");
  }

  // The pair array is neither an attribute nor a fixed field: it is where
  // the attributes are stored.
  auto check_list = [&](const std::string& key, const std::vector<std::string>& names,
                        const std::string& what) {
    for (const auto& f : names) {
      if (!ctx.CheckFieldName(a[key], f, what)) continue;
      if (f == "_id" && key == "fields") ctx.Report(a[key], "'_id' cannot be an attribute");
      if (array_ok && f == rule.array_field)
        ctx.Report(a[key], "'" + f + "' in '" + key + "' is the array that holds the attributes" +
                               (a["array"] ? "" : " ('" + f + "' by default)") +
                               ", expected " + (key == "fields" ? "attribute" : "fixed") +
                               " fields other than the array");
    }
  };
  ctx.Step([&] {
    rule.fields = ctx.StringList(a, "fields");
    if (a["fields"] && a["fields"].IsSequence() && a["fields"].size() == 0)
      ctx.Report(a["fields"], "'fields' must list at least one attribute");
    check_list("fields", rule.fields, "attribute field");
  });
  ctx.Step([&] {
    rule.except = ctx.StringList(a, "except");
    check_list("except", rule.except, "fixed field");
  });
  if (bool(a["fields"]) == bool(a["except"]))
    ctx.Report(a, "give either 'fields' (the attributes) or 'except' (the fixed fields), not both "
               "and not neither");
  ctx.Step([&] { rule.unfold = ParseBool(ctx, a, "unfold", true); });
  ctx.Step([&] { rule.fix_elem_match = ParseBool(ctx, a, "fix_elem_match", true); });
  ctx.Step([&] {
    rule.migrating = ParseMigrating(ctx, a["migrating"]);
    if (a["migrating"]) rule.adoption = rule.migrating ? Adoption::kByRule : Adoption::kOff;
  });
  return rule;
}

std::string AttributeRule::Describe() const {
  const char* state = !migrating ? "" : StoresFlat() ? ", migrating to flat" : ", migrating";
  return logical.full() + " (array '" + array_field + "'" + state + ")";
}

std::string AttributeRule::OnRemoval() const {
  return "the documents stay as stored: reads of " + logical.full() +
         " return the attributes as the array '" + array_field + "' of {" + key_name + ", " +
         value_name + "} pairs, and queries naming an attribute no longer match them, until the "
         "rule is back";
}

std::string AttributeRule::OnAddition() const {
  return "documents already in " + logical.full() + " are not converted: their attributes stay "
         "plain fields, which queries on attributes (answered from the array '" + array_field +
         "') do not match, until they are rewritten";
}

std::string AttributeRule::Unconverted() const {
  // An attribute stored as a plain field. With `fields` listed, any of
  // them present; otherwise a document without the pair array that has a
  // field besides _id and `except`.
  std::string json;
  if (!fields.empty()) {
    for (const std::string& field : fields)
      json += std::string(json.empty() ? "" : ", ") + "{" + JsonQuote(field) + ": {\"$exists\": true}}";
    return "{\"$or\": [" + json + "]}";
  }
  std::string kept = "\"_id\"";
  for (const std::string& field : except) kept += ", " + JsonQuote(field);
  // A field named "" or starting with "$" is no attribute (IsAttribute):
  // such a document is stored as written by design. A name starts with
  // "$" when it sorts from "$" up to "%" (bytes 0x24, 0x25; "$" alone is a
  // field path in an expression: the literal says it is a string), which
  // every engine answers alike ($substrCP of "$x" is "" on the stand-in).
  return "{" + JsonQuote(array_field) +
         ": {\"$exists\": false}, \"$expr\": {\"$gt\": [{\"$size\": {\"$filter\": "
         "{\"input\": {\"$objectToArray\": \"$$ROOT\"}, \"cond\": {\"$and\": ["
         "{\"$not\": [{\"$in\": [\"$$this.k\", [" + kept + "]]}]}, "
         "{\"$ne\": [\"$$this.k\", \"\"]}, "
         "{\"$not\": [{\"$and\": [{\"$gte\": [\"$$this.k\", {\"$literal\": \"$\"}]}, "
         "{\"$lt\": [\"$$this.k\", \"%\"]}]}]}]}}}}, 0]}}";
}

std::vector<NamespaceForms> AttributeRule::Forms() const {
  std::string pairs = "attribute " + array_field + " {" + key_name + ", " + value_name + "} ";
  const std::vector<std::string>& names = fields.empty() ? except : fields;
  pairs += fields.empty() ? "except [" : "fields [";
  for (size_t i = 0; i < names.size(); ++i) pairs += (i ? ", " : "") + names[i];
  pairs += "]";
  NamespaceForms forms{logical, StoresFlat() ? std::string(kPlainForm) : pairs, {pairs}};
  if (migrating) forms.reads.emplace_back(kPlainForm);  // both forms read
  return {forms};
}

}  // namespace remold
