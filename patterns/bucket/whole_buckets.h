// Filters on the readings that select whole buckets: the meta fields as
// they are, and time ranges whose bounds fall on bucket boundaries
// ($gte/$gt/$lt/$lte on dates, multiples of the span), at the top level or
// in an $and of such conditions (nested too). Such a filter selects exactly
// the readings of the buckets its translation selects, so a delete can
// remove whole buckets and a $group can read whole buckets.
// Pure.
#pragma once

#include <optional>
#include <string>

#include "common/doc.h"
#include "patterns/bucket/rule.h"

namespace remold {

// Appends to `out` the filter on bucket documents that selects exactly the
// buckets whose readings `q` selects; or says why `q` cuts through buckets
// (or names another field), in words for a delete's refusal.
std::optional<std::string> WholeBucketFilter(const BucketRule& rule, const bson_t* q, bson_t* out);

}  // namespace remold
