// The bucket pattern's rewrites: writes become bucket upserts, reads unpack
// buckets, whole-bucket deletes, everything else is refused clearly.
//
// Entry points by command; each returns a complete Plan (see plan.h) and
// never fails silently: what it cannot do exactly it refuses with a
// MongoDB-shaped error.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "patterns/bucket/rule.h"
#include "rewrite/capabilities.h"
#include "rewrite/command.h"
#include "rewrite/plan.h"
#include "rules/rule_context.h"

namespace remold {

// The pattern's rewrite part (patterns/pattern.h).
std::optional<Plan> RewritePattern(const Command& command, const RuleContext& rule,
                                   const BucketRule& bucket, const Capabilities& caps);

// Unpacking: each measurement of a bucket becomes a document again, with
// the bucket's meta fields merged in.
std::vector<Doc> ViewStages(const BucketRule& rule);
// The view reads the bucket collection.
inline Namespace ViewSource(const BucketRule& rule) { return rule.buckets; }
// A meta field: every reading of a bucket has the bucket's value.
bool PassesThrough(const BucketRule& rule, std::string_view field);

// "bucket rule '<name>' for <db.collection>": how every refusal starts.
std::string BucketRuleLabel(const RuleContext& rule, const BucketRule& bucket);
// Why a read is refused while rule.flat_readings_left ("is refused while
// ...: `remold migrate --rule NAME` moves them ..."), after the command's name.
std::string FlatReadingsLeft(const std::string& rule_name, const BucketRule& bucket);
// engine/rewrites.h, MayRefuseReads: reads through the view (a $lookup,
// a view on the collection) are refused as the collection's own reads are.
inline std::optional<std::string> ReadsRefused(const BucketRule& rule, const std::string& rule_name) {
  if (!rule.flat_readings_left) return std::nullopt;
  return FlatReadingsLeft(rule_name, rule);
}

// A reading an insert cannot store: its index in the batch, why, and the
// code of the write error.
struct RejectedReading {
  size_t index;
  int code;
  std::string message;
};

// The readings of one insert as upserts of the bucket collection: the
// statements ({q, u, upsert}), the batch indexes each stores, and the
// readings refused (with `ordered`, the first refusal ends the batch).
// `too_large` says why nothing can be stored when one upsert exceeds the
// maximum document size.
//
// Unordered, and ordered when every reading has an _id of its own in the
// batch (`whole_batch`), one statement per bucket takes the readings of the
// whole batch, in the order of each bucket's first reading; ordered
// otherwise, runs of consecutive readings of one bucket. For whole-batch
// statements, `owners` ({meta..., start} of each statement's bucket) and
// `reading_bytes` (what each reading added to the bucket's `bytes`) let a
// failed ordered insert take readings after its first error out again.
struct BucketUpserts {
  std::vector<Doc> statements;
  std::vector<std::vector<size_t>> readings;
  std::vector<RejectedReading> rejected;
  std::optional<std::string> too_large;
  bool whole_batch = false;
  std::vector<Doc> owners;
  std::vector<std::vector<int64_t>> reading_bytes;
};
BucketUpserts PlanBucketUpserts(const BucketRule& rule, const std::string& who,
                                const std::vector<std::span<const uint8_t>>& docs, bool ordered,
                                const Capabilities& caps);

// Per-command rewrites, used by RewritePattern; `who` is the rule's label.
Plan RewriteBucketInsert(const Command& command, const BucketRule& rule, const std::string& who,
                         const Capabilities& caps);
Plan RewriteBucketFind(const Command& command, const BucketRule& rule, const std::string& who);
Plan RewriteBucketAggregate(const Command& command, const BucketRule& rule, const std::string& who);
Plan RewriteBucketCount(const Command& command, const BucketRule& rule);
Plan RewriteBucketDistinct(const Command& command, const BucketRule& rule);
Plan RewriteBucketGetMore(const Command& command, const BucketRule& rule);
Plan RewriteBucketKillCursors(const Command& command, const BucketRule& rule);
Plan RewriteBucketDelete(const Command& command, const BucketRule& rule, const std::string& who);

// Catalog commands (catalog.cc): create prepares the bucket collection
// and its index; listIndexes lists the bucket collection's indexes;
// createIndexes, dropIndexes, collStats, validate and collMod are refused
// (CommandNotSupported), naming the bucket collection to run them on.
Plan RewriteBucketCreate(const Command& command, const BucketRule& rule, const std::string& who);
Plan RewriteBucketListIndexes(const Command& command, const BucketRule& rule);
Plan RefuseBucketCatalogCommand(const Command& command, const BucketRule& rule,
                                const std::string& who);

// The client's command sent to the bucket collection instead: the
// collection named under `collection_key`, everything else as it is.
BackendCommand RedirectedToBuckets(const Command& command, const BucketRule& rule,
                                   std::string_view collection_key);

// The createIndexes command that ensures {meta..., bucket_time} exists.
BackendCommand EnsureBucketIndex(const BucketRule& rule);

}  // namespace remold
