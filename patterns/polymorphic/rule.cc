#include "patterns/polymorphic/rule.h"

#include <yaml-cpp/yaml.h>

#include <string>

#include "common/doc.h"
#include "rules/file_context.h"

namespace remold {

PolymorphicRule PolymorphicRule::Parse(const FileContext& ctx, const YAML::Node& p, const Namespace& logical) {
  ctx.CheckKeys(p, "'polymorphic'", {"collection", "field", "value", "migrating"});
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
  written.share = WrittenNamespace::Share{field, value};
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
  const std::string form = "polymorphic " + stored.full() + " " + field + "=" + value;
  NamespaceForms forms{logical, form, {form}};
  // While documents written before the rule remain, reads are refused: never wrong.
  if (documents_left) forms.reads.emplace_back(kPlainForm);
  return {forms};
}

}  // namespace remold
