// The bucket pattern's rewrites: writes become bucket upserts, reads unpack
// buckets, whole-bucket deletes, everything else is refused clearly.
//
// Entry points by command; each returns a complete Plan (see plan.h) and
// never fails silently: what it cannot do exactly it refuses with a
// MongoDB-shaped error.
#pragma once

#include "rewrite/capabilities.h"
#include "rewrite/command.h"
#include "rewrite/plan.h"
#include "rules/rule.h"

namespace remold {

Plan RewriteBucket(const Command& command, const Rule& rule, const BucketRule& bucket,
                   const Capabilities& caps);

// Per-command rewrites, used by RewriteBucket.
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

// A plan that answers at once with `reply`.
Plan ImmediateReply(Doc reply);

}  // namespace remold
