#include "patterns/polymorphic/rule.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "common/doc.h"
#include "rules/file_context.h"
#include "rules/yaml_type.h"

namespace remold {
namespace {

// A YAML value as Extended JSON: mappings and lists as objects and arrays,
// scalars by their YAML type (an Extended JSON object such as
// {$date: ...} reads as what it stands for).
std::string JsonOf(const FileContext& ctx, const YAML::Node& node) {
  switch (TypeOf(node)) {
    case YamlType::kNull:
      return "null";
    case YamlType::kBool:
      return node.as<bool>() ? "true" : "false";
    case YamlType::kInt:
      return std::to_string(node.as<long long>());
    case YamlType::kFloat: {
      const double number = node.as<double>();
      if (!std::isfinite(number)) ctx.Fail(node, "a number of the validator is not finite, expected a finite number");
      char text[32];
      std::snprintf(text, sizeof text, "%.17g", number);
      return std::string(text).find_first_of(".eE") == std::string::npos ? std::string(text) + ".0" : text;
    }
    case YamlType::kString:
      return JsonQuote(node.Scalar());
    case YamlType::kList: {
      std::string out = "[";
      for (const auto& item : node) out += (out.size() > 1 ? ", " : "") + JsonOf(ctx, item);
      return out + "]";
    }
    case YamlType::kMapping: {
      std::string out = "{";
      for (const auto& entry : node)
        out += (out.size() > 1 ? ", " : "") + JsonQuote(ctx.KeyName(entry.first, "key")) + ": " +
               JsonOf(ctx, entry.second);
      return out + "}";
    }
    default:
      ctx.Fail(node, "a value of the validator is " + Found(node) + ", expected a mapping, list or plain scalar");
  }
}

// The validator as the stored documents must match it: a $jsonSchema that
// allows no properties but those it lists gets the discriminator's, with
// the type's value as its only one.
Doc StoredValidator(const Doc& validator, const std::string& field, const std::string& value) {
  std::optional<Doc> schema = FindDocument(validator.get(), "$jsonSchema");
  std::optional<bson_iter_t> additional = schema ? Find(schema->get(), "additionalProperties") : std::nullopt;
  if (!additional || !BSON_ITER_HOLDS_BOOL(&*additional) || bson_iter_bool(&*additional)) return validator;
  Doc properties = FindDocument(schema->get(), "properties").value_or(Doc());
  Doc only, values;
  bson_t array;
  BSON_APPEND_ARRAY_BEGIN(only.mut(), "enum", &array);
  BSON_APPEND_UTF8(&array, "0", value.c_str());
  bson_append_array_end(only.mut(), &array);
  AppendDoc(properties.mut(), field, only);
  Doc new_schema;
  bool has_properties = false;
  bson_iter_t it;
  bson_iter_init(&it, schema->get());
  while (bson_iter_next(&it)) {
    if (std::string_view(bson_iter_key(&it)) == "properties") {
      AppendDoc(new_schema.mut(), "properties", properties);
      has_properties = true;
    } else {
      AppendValue(new_schema.mut(), bson_iter_key(&it), it);
    }
  }
  if (!has_properties) AppendDoc(new_schema.mut(), "properties", properties);
  Doc out;
  bson_iter_init(&it, validator.get());
  while (bson_iter_next(&it)) {
    if (std::string_view(bson_iter_key(&it)) == "$jsonSchema") AppendDoc(out.mut(), "$jsonSchema", new_schema);
    else AppendValue(out.mut(), bson_iter_key(&it), it);
  }
  return out;
}

}  // namespace

PolymorphicRule PolymorphicRule::Parse(const FileContext& ctx, const YAML::Node& p, const Namespace& logical) {
  ctx.CheckKeys(p, "'polymorphic'", {"collection", "field", "value", "validator", "migrating"});
  PolymorphicRule rule;
  rule.logical = logical;
  ctx.Step([&] {
    std::string collection = ctx.String(p, "collection", "'polymorphic'", "the name of the collection that stores every type");
    if (collection.empty() || collection.find('$') != std::string::npos || collection == logical.collection ||
        collection.starts_with("system."))
      ctx.Fail(p["collection"], "stored collection '" + collection +
                                    "' must be a collection name other than the logical one");
    rule.stored = {logical.db, collection};
  });
  ctx.Step([&] {
    rule.field = ctx.OptionalString(p, "field", "type", "a field name");
    if (p["field"] && ctx.CheckFieldName(p["field"], rule.field, "discriminator field") && rule.field == "_id")
      ctx.Fail(p["field"], "discriminator field '_id' is every document's identity, expected another field");
  });
  ctx.Step([&] {
    rule.value = ctx.String(p, "value", "'polymorphic'", "the type's value of the discriminator (a string)");
    if (rule.value.empty()) ctx.Fail(p["value"], "'value' is empty, expected the type's name");
  });
  if (YAML::Node v = p["validator"]) {
    ctx.Step([&] {
      if (!v.IsMap() || v.size() == 0)
        ctx.Fail(v, "'validator' is " + Found(v) + ", expected a mapping: a filter such as {$jsonSchema: {...}}");
      std::string error;
      std::optional<Doc> validator = Doc::FromJson(JsonOf(ctx, v), &error);
      if (!validator) ctx.Fail(v, "'validator' is not a valid filter: " + error);
      if (Find(validator->get(), rule.field))
        ctx.Fail(v, "'validator' names '" + rule.field + "', the discriminator remold sets");
      rule.validator = StoredValidator(*validator, rule.field, rule.value).ToCanonicalJson();
    });
  }
  if (YAML::Node m = p["migrating"]) {
    // Only `false`: documents move between the collections with `remold
    // migrate`, and reads cannot cover both while they move.
    ctx.Step([&] {
      if (ParseBool(ctx, p, "migrating", false))
        ctx.Fail(m, "'migrating' is true, expected false (the operator's word that " + logical.full() +
                        " holds no document written before the rule); documents written before it are moved "
                        "with `remold migrate`, and reads are refused until none is left");
      rule.adoption = Adoption::kOff;
    });
  }
  return rule;
}

std::vector<WrittenNamespace> PolymorphicRule::Writes() const {
  WrittenNamespace written{stored, [stored = stored](std::string_view) {
                             return "stored collection '" + stored.full() +
                                    "' is itself the logical namespace of a rule, expected a plain collection";
                           }};
  written.share = WrittenNamespace::Share{field, value, validator};
  return {written};
}

std::string PolymorphicRule::TypeFilter() const { return "{" + JsonQuote(field) + ": " + JsonQuote(value) + "}"; }

std::string PolymorphicRule::Describe() const { return logical.full() + " -> " + stored.full() + " " + TypeFilter(); }

std::string PolymorphicRule::OnRemoval() const {
  return "the documents stay in " + stored.full() + " with " + TypeFilter() + ", and reads of " + logical.full() +
         " no longer return them until the rule is back (or they are moved back to " + logical.full() +
         ": `remold migrate --to flat`)";
}

std::string PolymorphicRule::OnAddition() const {
  if (adoption == Adoption::kOff)
    return "documents already in " + logical.full() + " are not converted (`migrating: false`): reads of " +
           logical.full() + " return the documents of " + stored.full() + " with " + TypeFilter() +
           " only, and those documents stay where they are, unread, until they are migrated";
  return "documents already in " + logical.full() + " are not converted: while any is left (remold counts them), "
         "reads and writes of " + logical.full() + " that select documents are refused until `remold migrate` "
         "has moved them into " + stored.full();
}

std::vector<NamespaceForms> PolymorphicRule::Forms() const {
  // The validator too: sidecars whose rules give a type different ones
  // would each put theirs in the stored collection's validator.
  const std::string form =
      "polymorphic " + stored.full() + " " + field + "=" + value + (validator.empty() ? "" : " validator " + validator);
  NamespaceForms forms{logical, form, {form}};
  // While documents written before the rule remain, reads are refused: never wrong.
  if (documents_left) forms.reads.emplace_back(kPlainForm);
  return {forms};
}

}  // namespace remold
