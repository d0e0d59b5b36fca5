// The attribute pattern's migration (pure): one document at a time between
// the form written before the rule (attributes as plain fields) and the
// rule's form (attributes as {k, v} pairs). Used by `remold migrate` and,
// while the rule is `migrating`, by updates that change attributes.
#pragma once

#include <optional>
#include <string>

#include "common/doc.h"
#include "patterns/adoption.h"
#include "patterns/attribute/rule.h"
#include "patterns/migration.h"

namespace remold {

// The document in the rule's form, or nullopt with `why` when it cannot be
// stored so (its pair array is not an array of pairs).
std::optional<Doc> ConvertedDocument(const AttributeRule& rule, const bson_t* flat,
                                     std::string* why = nullptr);

// The document as written before the rule, or nullopt with `why` when its
// pairs cannot become fields (a name repeats, clashes with a field, or an
// element is not a pair): such a document is left as it is.
std::optional<Doc> FlatDocument(const AttributeRule& rule, const bson_t* stored,
                                std::string* why = nullptr);

// The migration part of the pattern (patterns/migration.h). Flat
// documents are those of rule.Unconverted(); documents in the rule's form
// are those with the pair array.
std::string DocumentsToMigrate(const AttributeRule& rule, MigrationDirection direction);
std::optional<Doc> MigratedDocument(const AttributeRule& rule, const bson_t* document,
                                    MigrationDirection direction, std::string* why);
inline std::optional<MigrationDirection> MigratingTo(const AttributeRule& rule) { return rule.migrating; }
inline MigrationWords WordsOf(const AttributeRule&, MigrationDirection direction) {
  if (direction == MigrationDirection::kToRule)
    return {"the flat form", "`migrating: true` can be removed from the rule",
            "written before the rule are not in its form yet", "the rule is migrating: reads cover both forms"};
  return {"the rule's form", "the rule can be retired or changed", "are still in the rule's form",
          "the rule is migrating to the flat form: reads cover both forms"};
}

// The adoption part of the pattern (patterns/adoption.h): while documents
// written before the rule remain, it serves as `migrating: true` does.
inline Adoption AdoptionOf(const AttributeRule& rule) { return rule.adoption; }
inline AttributeRule WhileUnconverted(const AttributeRule& rule) {
  AttributeRule serving = rule;
  serving.migrating = MigrationDirection::kToRule;
  return serving;
}
inline std::string ServingWhileUnconverted(const AttributeRule&, const std::string& migrate) {
  return "queries match the attributes in both forms (scanning: plain fields have no pair index), reads "
         "unfold the documents that have pairs and return the others as stored, and writes store the rule's "
         "form, until " + migrate + " has converted them";
}

}  // namespace remold
