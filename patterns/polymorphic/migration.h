// The polymorphic pattern's migration and adoption parts (patterns/
// migration.h, CollectionMigration; patterns/adoption.h), pure: the
// documents of a type's own collection move into the stored collection
// with the discriminator after their fields, under their own _id, and back
// without it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/doc.h"
#include "patterns/adoption.h"
#include "patterns/migration.h"
#include "patterns/polymorphic/rule.h"

namespace remold {

CollectionMove MoveOf(const PolymorphicRule& rule, MigrationDirection direction);

MovedBatch MovedDocuments(const PolymorphicRule& rule, MigrationDirection direction, const std::vector<Doc>& batch,
                          std::string_view token);

// Documents written before the rule stay in the logical collection, which
// reads of the stored one would miss; reads cannot cover both while
// `remold migrate` moves them, so reads and the writes that select
// documents are refused until none is left.
inline Adoption AdoptionOf(const PolymorphicRule& rule) { return rule.adoption; }
inline PolymorphicRule WhileUnconverted(const PolymorphicRule& rule) {
  PolymorphicRule serving = rule;
  serving.documents_left = true;
  return serving;
}
inline std::string ServingWhileUnconverted(const PolymorphicRule& rule, const std::string& migrate) {
  return "reads, updates and deletes of " + rule.logical.full() + " are refused (117), and inserts go into " +
         rule.stored.full() + ", until " + migrate + " has moved them there";
}

}  // namespace remold
