// The polymorphic pattern's rule: documents of several types, which the
// application keeps in one collection per type, are stored in one
// collection with a discriminator field (see patterns/pattern.h for what
// every pattern's rule provides). One rule file per type; the rules of one
// stored collection name the same discriminator and distinct values.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "patterns/adoption_mode.h"
#include "rules/namespace.h"
#include "rules/namespace_forms.h"
#include "rules/written_namespace.h"

namespace YAML {
class Node;
}

namespace remold {

class FileContext;

// Polymorphic pattern: every document of `logical` is stored in `stored`
// as written, with {<field>: <value>} after its own fields.
struct PolymorphicRule {
  Namespace logical;
  Namespace stored;
  std::string field = "type";
  std::string value;
  // The type's validator (Extended JSON; "" for none): a filter, usually
  // {$jsonSchema: ...}, that every document of the type must match as
  // stored. The rules of a stored collection put theirs in its validator,
  // each for its own type's documents; a write that breaks it fails with
  // DocumentValidationFailure (121), as MongoDB's validation fails it.
  std::string validator;
  // Whether the rule file said `migrating: false` (patterns/adoption.h).
  Adoption adoption = Adoption::kAuto;
  // Set while the logical collection itself still holds documents written
  // before the rule (or before remold has counted them): every read and
  // every write that selects documents would miss them, and is refused
  // until `remold migrate` has moved them.
  bool documents_left = false;

  static constexpr std::string_view kName = "polymorphic";
  // Parses the rule file's `polymorphic:` section (a mapping).
  static PolymorphicRule Parse(const FileContext& ctx, const YAML::Node& section, const Namespace& logical);
  // The stored collection, shared with the rules of the other types.
  std::vector<WrittenNamespace> Writes() const;
  // "db.articles -> db.content {type: "ARTICLE"}", for `remold check`.
  std::string Describe() const;
  std::string OnRemoval() const;
  std::string OnAddition() const;
  std::vector<NamespaceForms> Forms() const;
  // Every document of the logical collection itself was written before
  // the rule.
  std::string Unconverted() const { return "{}"; }
  // {<field>: <value>}, as Extended JSON.
  std::string TypeFilter() const;
  // The name on the stored collection of this type's index `name`
  // ("articles.slug_1"), and the prefix of those names.
  std::string IndexPrefix() const { return logical.collection + "."; }
};

}  // namespace remold
