// The attribute pattern's rule: sparse fields live as {k, v} pairs in one
// array served by one index (see patterns/pattern.h for what every
// pattern's rule provides).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "patterns/adoption_mode.h"
#include "patterns/migration_direction.h"
#include "rules/namespace.h"
#include "rules/namespace_forms.h"
#include "rules/written_namespace.h"

namespace YAML {
class Node;
}

namespace remold {

class FileContext;

// Attribute pattern: sparse fields live as {k, v} pairs in one array, so
// one {array.k, array.v} index serves a query on any of them:
//   {<fixed fields...>, <array>: [{<key>: "ram_gb", <value>: 16}, ...]}
struct AttributeRule {
  Namespace logical;
  std::string array_field = "specs";
  std::string key_name = "k";
  std::string value_name = "v";
  // Which top-level fields are attributes: the listed ones, or (when
  // `fields` is empty) every field except `_id`, the array and `except`.
  std::vector<std::string> fields;
  std::vector<std::string> except;
  bool unfold = true;          // reads return the attributes as fields
  bool fix_elem_match = true;  // {"a.k": X, "a.v": P} is read as $elemMatch
  // Set while a migration is under way (`remold migrate`): documents may
  // be in either form; filters match both, and a write stores the form of
  // the direction (`migrating: true` or `to_rule`: pairs; `to_flat`: plain
  // fields), converting the documents an attribute update touches first.
  // Costs reads an index: a filter on attributes also scans.
  std::optional<MigrationDirection> migrating;
  bool StoresFlat() const { return migrating == MigrationDirection::kToFlat; }
  // Whether the rule file said `migrating` (patterns/adoption.h): absent,
  // remold sets it while documents written before the rule remain.
  Adoption adoption = Adoption::kAuto;

  bool IsAttribute(std::string_view field) const;
  // In a stack (patterns/pattern.h), the lower rule: what is not an
  // attribute is stored as written.
  bool StoresAsWritten(std::string_view field) const {
    return !IsAttribute(field) && field != array_field;
  }
  std::vector<std::string> ReservedFields() const { return {array_field}; }

  static constexpr std::string_view kName = "attribute";
  // Parses the rule file's `attribute:` section (a mapping).
  static AttributeRule Parse(const FileContext& ctx, const YAML::Node& section,
                             const Namespace& logical);
  // Nothing: the documents stay in the logical collection.
  std::vector<WrittenNamespace> Writes() const { return {}; }
  // "db.coll (array 'specs')", for `remold check`.
  std::string Describe() const;
  // What becomes of the stored data when a running proxy drops the rule,
  // and of data written before when it gains the rule (one sentence each,
  // for the reload's warning).
  std::string OnRemoval() const;
  std::string OnAddition() const;
  // How it stores the documents of its collections, as it serves now
  // (patterns/pattern.h, "Sidecars").
  std::vector<NamespaceForms> Forms() const;
  // Documents of `logical` still in the form written before the rule, as
  // a filter (Extended JSON); "" when there is no such form.
  std::string Unconverted() const;
};

}  // namespace remold
