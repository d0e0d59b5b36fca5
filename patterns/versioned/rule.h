// The schema versioning pattern's rule: every document carries the version
// of its shape, and remold upgrades older shapes step by step to the
// current one (see patterns/pattern.h for what every pattern's rule
// provides).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "patterns/expression/expression.h"
#include "rules/namespace.h"
#include "rules/namespace_forms.h"
#include "rules/written_namespace.h"

namespace YAML {
class Node;
}

namespace remold {

class FileContext;

// One step of an upgrade, on top-level fields of the document.
struct UpgradeStep {
  enum class Kind {
    kRename,   // `field` becomes `to`, in its place (a field named `to` goes)
    kDefault,  // `field` set to `value` where it is missing (added last)
    kCompute,  // `field` set to `expression` (in its place, or added last)
    kConvert,  // `field`'s value converted to `type` where it converts exactly
    kMoveInto,   // `fields` moved into the subdocument `field` (created last)
    kMoveOutOf,  // `fields` moved out of the subdocument `field`, to its place
    kRemove,     // `fields` removed
  };
  enum class Type { kString, kInt, kLong, kDouble };

  Kind kind = Kind::kRename;
  std::string field;
  std::string to;                   // kRename
  std::vector<std::string> fields;  // kMoveInto, kMoveOutOf, kRemove
  Expression::Literal value;        // kDefault
  Expression expression;            // kCompute
  Type type = Type::kString;        // kConvert

  // The top-level fields whose value the step may change (or remove).
  std::vector<std::string> Changes() const;
};

// A version of the documents' shape, and the steps from the one before.
struct DocumentVersion {
  int32_t number = 1;
  std::vector<UpgradeStep> upgrade;  // empty for the first version
};

// Schema versioning: documents at older versions are upgraded, step by
// step, whenever they are read through remold; writes store the current
// version; `remold migrate` upgrades the rest in place.
//   {_id, ..., <field>: <version>}   (missing or null: the first version)
struct VersionedRule {
  Namespace logical;
  std::string field = "schemaVersion";
  std::vector<DocumentVersion> versions;  // ascending; the last is current
  // Documents read at an older version are stored upgraded afterwards
  // (each under a guard that it is unchanged since read).
  bool write_back = false;

  int32_t current() const { return versions.back().number; }
  int32_t first() const { return versions.front().number; }
  // Whether any upgrade step changes `field` (the version field counts).
  bool Changes(std::string_view field) const;

  static constexpr std::string_view kName = "versioned";
  // Each step of a version's upgrade, and each level of a computed step's
  // expression, nests the aggregation stage that upgrades documents on reads
  // (view.h) deeper: within these, every stage stays under 100 levels of
  // nesting, MongoDB's limit for a document, which leaves room in the 200 a
  // command may nest for the $lookup or $facet around it (a test holds the
  // worst case).
  static constexpr size_t kMaxUpgradeSteps = 10;
  static constexpr int kMaxUpgradeExpressionDepth = 4;
  // Reads upgrade through one stage per version after the first, before
  // the client's own stages; MongoDB refuses pipelines of over 1,000.
  static constexpr size_t kMaxVersions = 100;
  // Parses the rule file's `versioned:` section (a mapping; see rule.cc).
  static VersionedRule Parse(const FileContext& ctx, const YAML::Node& section,
                             const Namespace& logical);
  // Nothing: the documents stay in the logical collection.
  std::vector<WrittenNamespace> Writes() const { return {}; }
  // "db.coll (versions 1..3 in 'schemaVersion')", for `remold check`.
  std::string Describe() const;
  std::string OnRemoval() const;
  std::string OnAddition() const;
  // How it stores the documents of its collections, as it serves now
  // (patterns/pattern.h, "Sidecars").
  std::vector<NamespaceForms> Forms() const;
  // Documents at an older version, as a filter (Extended JSON).
  std::string Unconverted() const;
  // The stored values of older versions, as a JSON array: null (and a
  // missing field) for the first, then each older version's number.
  std::string OlderVersionValues() const;
  // In a stack (patterns/pattern.h), the upper rule: the version field is
  // what its checks and migrations filter on.
  std::vector<std::string> FieldsReadAsStored() const { return {field}; }
  // The version field, and every field an upgrade step changes.
  std::vector<std::string> FieldsWritten() const;
};

}  // namespace remold
