// The bucket pattern's migration part (patterns/migration.h,
// CollectionMigration), pure: readings written one per document in the
// logical collection move into buckets of the bucket collection, and back.
//
// Into buckets, a batch becomes the upserts an unordered insert of it
// would send (patterns/bucket/rewrite.h, PlanBucketUpserts), each under an
// _id derived from the token and its position and matching no existing
// bucket, so the batch lands in new buckets of its own, once. Back, each
// reading of a bucket becomes a document again (the measurement with the
// bucket's meta values, as reads return it), under the measurement's _id
// or, without one, an _id derived from the bucket's and its position.
#pragma once

#include <string_view>
#include <vector>

#include "common/doc.h"
#include "patterns/adoption.h"
#include "patterns/bucket/rule.h"
#include "patterns/migration.h"

namespace remold {

CollectionMove MoveOf(const BucketRule& rule, MigrationDirection direction);

MovedBatch MovedDocuments(const BucketRule& rule, MigrationDirection direction, const std::vector<Doc>& batch,
                          std::string_view token);

// The adoption part of the pattern (patterns/adoption.h). Readings
// written before the rule stay in the logical collection, and reads of the
// buckets would miss them: reads cannot cover both collections while
// `remold migrate` moves readings between them (a reading in the middle of
// its move would be seen twice, or not at all), so reads are refused until
// none is left.
inline Adoption AdoptionOf(const BucketRule& rule) { return rule.adoption; }
inline BucketRule WhileUnconverted(const BucketRule& rule) {
  BucketRule serving = rule;
  serving.flat_readings_left = true;
  return serving;
}
inline std::string ServingWhileUnconverted(const BucketRule& rule, const std::string& migrate) {
  return "reads and deletes of " + rule.logical.full() + " are refused (117), and inserts go into " +
         rule.buckets.full() + ", until " + migrate + " has moved them there";
}

}  // namespace remold
