// The bucket pattern's rewrites: writes become bucket upserts, reads unpack
// buckets, whole-bucket deletes, everything else is refused clearly.
//
// Entry points by command; each returns a complete Plan (see plan.h) and
// never fails silently: what it cannot do exactly it refuses with a
// MongoDB-shaped error.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "rewrite/capabilities.h"
#include "rewrite/command.h"
#include "rewrite/plan.h"
#include "rules/rule.h"

namespace remold {

// The pattern's rewrite part (patterns/pattern.h).
std::optional<Plan> RewritePattern(const Command& command, const Rule& rule,
                                   const BucketRule& bucket, const Capabilities& caps);

// Unpacking: each measurement of a bucket becomes a document again, with
// the bucket's meta fields merged in.
std::vector<Doc> ViewStages(const BucketRule& rule);
// The view reads the bucket collection.
inline Namespace ViewSource(const BucketRule& rule) { return rule.buckets; }
// A meta field: every reading of a bucket has the bucket's value.
bool PassesThrough(const BucketRule& rule, std::string_view field);

// Per-command rewrites, used by RewritePattern.
Plan RewriteBucketInsert(const Command& command, const BucketRule& rule, const Capabilities& caps);
Plan RewriteBucketFind(const Command& command, const BucketRule& rule);
Plan RewriteBucketAggregate(const Command& command, const BucketRule& rule);
Plan RewriteBucketCount(const Command& command, const BucketRule& rule);
Plan RewriteBucketDistinct(const Command& command, const BucketRule& rule);
Plan RewriteBucketGetMore(const Command& command, const BucketRule& rule);
Plan RewriteBucketKillCursors(const Command& command, const BucketRule& rule);
Plan RewriteBucketDelete(const Command& command, const BucketRule& rule);

// The createIndexes command that ensures {meta..., bucket_time} exists.
BackendCommand EnsureBucketIndex(const BucketRule& rule);

}  // namespace remold
