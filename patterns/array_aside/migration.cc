#include "patterns/array_aside/migration.h"

#include "common/doc.h"
#include "patterns/array_aside/stored_form.h"
#include "patterns/array_aside/writes.h"

namespace remold {

std::string AsideDocumentsToMigrate(const AsideLayout& layout, MigrationDirection direction) {
  if (direction == MigrationDirection::kToFlat) return MarkedFilter(layout).ToCanonicalJson();
  return "{" + JsonQuote(layout.marker) + ": {\"$exists\": false}, " +
         JsonQuote(layout.array + "." + std::to_string(layout.first)) + ": {\"$exists\": true}, " +
         // An array (an embedded document with a field named like the
         // position has no elements to match).
         JsonQuote(layout.array) + ": {\"$elemMatch\": {\"$exists\": true}}}";
}

}  // namespace remold
