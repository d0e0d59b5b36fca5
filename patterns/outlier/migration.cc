#include "patterns/outlier/migration.h"

#include "common/doc.h"
#include "patterns/outlier/stored_form.h"
#include "patterns/outlier/writes.h"

namespace remold {

std::string DocumentsToMigrate(const OutlierRule& rule, MigrationDirection direction) {
  if (direction == MigrationDirection::kToFlat) return MarkedFilter().ToCanonicalJson();
  return "{" + JsonQuote(kOutlierMarker) + ": {\"$exists\": false}, " +
         JsonQuote(rule.array + "." + std::to_string(rule.threshold)) + ": {\"$exists\": true}, " +
         // An array (an embedded document with a field named like the
         // position has no elements to match).
         JsonQuote(rule.array) + ": {\"$elemMatch\": {\"$exists\": true}}}";
}

Plan MigrationRound(const OutlierRule& rule, MigrationDirection direction, const std::string& rule_name) {
  return OutlierMigrationRound(rule_name, rule, direction);
}

}  // namespace remold
