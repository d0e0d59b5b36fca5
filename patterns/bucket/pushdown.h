// Bucket-level predicates from a filter on the logical (unpacked) documents.
//
// The result selects a superset of the buckets holding matching
// measurements, so "$match: pushdown" before unpacking only skips buckets
// that cannot match; the exact filter still runs after unpacking. Pushed
// down: meta-field predicates as they are; time-field bounds on dates as
// bounds on the bucket start; numeric bounds on fields with min/max
// summaries as bounds on those summaries; through $and, and $or when every
// branch can be pushed down.
#pragma once

#include "common/doc.h"
#include "patterns/bucket/rule.h"

namespace remold {

// Empty when nothing can be pushed down.
Doc BucketPushdown(const BucketRule& rule, const bson_t* filter);

// floor(ms / span) * span, for negative times too. A date in the partial
// span above the earliest date there is belongs to a bucket starting at
// that date (its start would be below it).
int64_t BucketStart(const BucketRule& rule, int64_t time_ms);

}  // namespace remold
