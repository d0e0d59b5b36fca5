// Comparing BSON values the way MongoDB orders them ($min, $max, sort):
// first by canonical type (MinKey < null < numbers < strings < objects <
// arrays < binary < ObjectId < bool < date < timestamp < regex < MaxKey),
// then by value; numbers compare by value across int32/int64/double.
// Strings compare bytewise (no collation). Pure.
#pragma once

#include <bson/bson.h>

namespace remold {

// <0, 0, >0 as a is less than, equal to, or greater than b.
int CompareBsonValues(const bson_iter_t& a, const bson_iter_t& b);

}  // namespace remold
