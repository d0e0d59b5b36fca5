// A $group over the readings answered from the buckets without unwinding
// them.
//
// It applies when the pipeline starts with [$match,] $group and:
//   - the $match (if any) selects whole buckets (patterns/bucket/whole_buckets.h);
//   - the group key is the same for every reading of a bucket: constants,
//     meta fields, and date parts ($hour, $dayOfYear, ...) or $dateTrunc of
//     the time field in UTC whose period is a multiple of the bucket span
//     (read from the bucket's start instead);
//   - every accumulator is a count ({$sum: <number>}, {$count: {}}) or
//     $sum, $avg, $min or $max of a summarised field.
// Each bucket then contributes its readings through array expressions over
// its readings' values ($size, $sum, $min and $max of "m.<field>"; for
// $avg, the sum and the number of numeric values), and the $group runs over
// buckets. The answer is the unwinding plan's: the same values are summed,
// only grouped differently (so a floating-point sum may differ in its last
// bits), and the same types come out.
// Pure.
#pragma once

#include <optional>
#include <vector>

#include "common/doc.h"
#include "patterns/bucket/rule.h"

namespace remold {

struct GroupPushdown {
  std::vector<Doc> stages;  // on the bucket collection, replacing the client's first `consumed`
  size_t consumed = 0;
};

// nullopt when the pipeline's start does not qualify (it is then unwound).
std::optional<GroupPushdown> PushDownGroup(const BucketRule& rule, const std::vector<Doc>& client_stages);

}  // namespace remold
