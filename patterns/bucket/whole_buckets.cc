#include "patterns/bucket/whole_buckets.h"

#include <limits>
#include <string>
#include <vector>

#include "patterns/bucket/pushdown.h"
#include "patterns/bucket/rewrite.h"

namespace remold {
namespace {

std::string SpanText(const BucketRule& rule) {
  int64_t ms = rule.span_ms;
  if (ms % 86'400'000 == 0) return std::to_string(ms / 86'400'000) + "d";
  if (ms % 3'600'000 == 0) return std::to_string(ms / 3'600'000) + "h";
  if (ms % 60'000 == 0) return std::to_string(ms / 60'000) + "m";
  return std::to_string(ms / 1000) + "s";
}

// Translates a time predicate into bounds on the bucket start, requiring
// every bound to fall on a bucket boundary.
std::optional<std::string> TimeBounds(const BucketRule& rule, const bson_iter_t& value, bson_t* out) {
  const std::string not_aligned = "time bounds must fall on bucket boundaries (multiples of " +
                                  SpanText(rule) + ") so that whole buckets are deleted: use $gte "
                                  "and $lt with aligned dates";
  if (!BSON_ITER_HOLDS_DOCUMENT(&value))
    return "the time predicate must be a range ($gte/$gt/$lt/$lte on dates)";
  bson_t bounds;
  bson_append_document_begin(out, rule.bucket_time_field.c_str(), -1, &bounds);
  bson_iter_t op;
  bson_iter_t copy = value;
  bson_iter_recurse(&copy, &op);
  while (bson_iter_next(&op)) {
    std::string_view name = bson_iter_key(&op);
    if (!BSON_ITER_HOLDS_DATE_TIME(&op)) return "time bounds must be dates";
    int64_t t = bson_iter_date_time(&op);
    // $gt and $lte bound at the date after t; the latest date has none.
    if ((name == "$gt" || name == "$lte") && t == std::numeric_limits<int64_t>::max()) return not_aligned;
    // Lower bound L (inclusive): buckets with start >= L, L aligned.
    // Upper bound U (exclusive): buckets with start + span <= U, U aligned.
    int64_t lower = name == "$gt" ? t + 1 : t;
    int64_t upper = name == "$lte" ? t + 1 : t;
    if (name == "$gte" || name == "$gt") {
      if (BucketStart(rule, lower) != lower) return not_aligned;
      BSON_APPEND_DATE_TIME(&bounds, "$gte", lower);
    } else if (name == "$lt" || name == "$lte") {
      if (BucketStart(rule, upper) != upper) return not_aligned;
      BSON_APPEND_DATE_TIME(&bounds, "$lt", upper);
    } else {
      return "time operator '" + std::string(name) + "' is not supported in a bucket delete";
    }
  }
  bson_append_document_end(out, &bounds);
  return std::nullopt;
}

// `$and: [c1, c2, ...]` of accepted conditions (nested too): each conjunct
// selects whole buckets, so their conjunction does; kept as an $and of the
// translated conjuncts (two bounds on the time field stay two conditions).
std::optional<std::string> AndFilter(const BucketRule& rule, const bson_iter_t& value, bson_t* out) {
  if (!BSON_ITER_HOLDS_ARRAY(&value)) return "$and must be an array of conditions";
  std::vector<Doc> conjuncts;
  bson_iter_t child;
  bson_iter_t copy = value;
  bson_iter_recurse(&copy, &child);
  while (bson_iter_next(&child)) {
    if (!BSON_ITER_HOLDS_DOCUMENT(&child)) return "$and must be an array of conditions";
    uint32_t length = 0;
    const uint8_t* data = nullptr;
    bson_iter_document(&child, &length, &data);
    bson_t conjunct;
    bson_init_static(&conjunct, data, length);
    Doc translated;
    if (auto error = WholeBucketFilter(rule, &conjunct, translated.mut())) return error;
    conjuncts.push_back(std::move(translated));
  }
  if (conjuncts.empty()) return "$and must be a non-empty array of conditions";
  AppendArray(out, "$and", conjuncts);
  return std::nullopt;
}

}  // namespace

std::optional<std::string> WholeBucketFilter(const BucketRule& rule, const bson_t* q, bson_t* out) {
  bson_iter_t it;
  bson_iter_init(&it, q);
  while (bson_iter_next(&it)) {
    std::string_view key = bson_iter_key(&it);
    if (key == "$and") {
      if (auto error = AndFilter(rule, it, out)) return error;
    } else if (PassesThrough(rule, key)) {
      AppendValue(out, key, it);
    } else if (key == rule.time_field) {
      if (auto error = TimeBounds(rule, it, out)) return error;
    } else {
      return "a delete may name only the meta fields and the time field '" + rule.time_field +
             "' (got '" + std::string(key) + "'): deleting individual readings would leave the "
             "bucket summaries wrong";
    }
  }
  return std::nullopt;
}

}  // namespace remold
