#include "patterns/bucket/group_pushdown.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>

#include "patterns/bucket/rewrite.h"
#include "patterns/bucket/whole_buckets.h"

namespace remold {
namespace {

constexpr int64_t kSecond = 1000;
constexpr int64_t kMinute = 60 * kSecond;
constexpr int64_t kHour = 60 * kMinute;
constexpr int64_t kDay = 24 * kHour;

// Fields each bucket gets for the $group: the key, each accumulator's part,
// and each $avg's count of numbers.
constexpr const char* kKey = "remold_key";
const std::string kPart = "remold_part_";
const std::string kNumbers = "remold_numbers_";

// Date parts that hold for a whole day, hour, minute or second (UTC).
std::optional<int64_t> PartPeriod(std::string_view op) {
  if (op == "$second") return kSecond;
  if (op == "$minute") return kMinute;
  if (op == "$hour") return kHour;
  for (std::string_view daily : {"$year", "$month", "$week", "$isoWeek", "$isoWeekYear", "$dayOfYear",
                                 "$dayOfMonth", "$dayOfWeek", "$isoDayOfWeek"})
    if (op == daily) return kDay;
  return std::nullopt;
}

// Buckets start at multiples of the span from the epoch: a period that is
// a multiple of the span never cuts through one (UTC has no leap seconds).
bool SpanDivides(const BucketRule& rule, int64_t period) { return period > 0 && period % rule.span_ms == 0; }

bool IsTimeField(const BucketRule& rule, const bson_iter_t& value) {
  return BSON_ITER_HOLDS_UTF8(&value) && bson_iter_utf8(&value, nullptr) == "$" + rule.time_field;
}

std::string BucketTime(const BucketRule& rule) { return "$" + rule.bucket_time_field; }

// {$hour: "$at"} or {$hour: {date: "$at"}} (no timezone) -> {$hour: "$start"}.
bool AppendDatePart(const BucketRule& rule, std::string_view op, const bson_iter_t& arg, bson_t* out,
                    const char* key) {
  std::optional<int64_t> period = PartPeriod(op);
  if (!period || !SpanDivides(rule, *period)) return false;
  if (BSON_ITER_HOLDS_DOCUMENT(&arg)) {
    bson_iter_t field;
    bson_iter_t copy = arg;
    bson_iter_recurse(&copy, &field);
    if (!bson_iter_next(&field) || std::string_view(bson_iter_key(&field)) != "date" || !IsTimeField(rule, field) ||
        bson_iter_next(&field))
      return false;  // a timezone, or not the time field
  } else if (!IsTimeField(rule, arg)) {
    return false;
  }
  Doc part;
  AppendString(part.mut(), op, BucketTime(rule));
  bson_append_document(out, key, -1, part.get());
  return true;
}

// {$dateTrunc: {date: "$at", unit, binSize?, startOfWeek?}} (no timezone),
// its bins a multiple of the span -> the same on "$start".
bool AppendDateTrunc(const BucketRule& rule, const bson_iter_t& arg, bson_t* out, const char* key) {
  if (!BSON_ITER_HOLDS_DOCUMENT(&arg)) return false;
  std::optional<std::string> unit;
  int64_t bin_size = 1;
  bool has_date = false;
  Doc trunc;
  bson_iter_t field;
  bson_iter_t copy = arg;
  bson_iter_recurse(&copy, &field);
  while (bson_iter_next(&field)) {
    const std::string_view name = bson_iter_key(&field);
    if (name == "date") {
      if (!IsTimeField(rule, field)) return false;
      AppendString(trunc.mut(), "date", BucketTime(rule));
      has_date = true;
      continue;
    }
    if (name == "unit" && BSON_ITER_HOLDS_UTF8(&field)) {
      unit = bson_iter_utf8(&field, nullptr);
    } else if (name == "binSize" && BSON_ITER_HOLDS_NUMBER(&field)) {
      const double size = bson_iter_as_double(&field);
      if (size < 1 || size != std::floor(size) || size > 1e9) return false;
      bin_size = static_cast<int64_t>(size);
    } else if (name != "startOfWeek") {
      return false;  // a timezone, or what the backend will refuse anyway
    }
    AppendValue(trunc.mut(), name, field);
  }
  if (!has_date || !unit) return false;
  // Bins of weeks, months, quarters and years start at midnights (UTC),
  // which are span multiples when the span divides a day. Bins of the
  // other units count from 2000-01-01T00:00Z: they start on span multiples
  // when that date and their period both are.
  constexpr int64_t kBinsFrom = 946'684'800'000;
  int64_t period = 0;
  if (*unit == "second") period = kSecond * bin_size;
  else if (*unit == "minute") period = kMinute * bin_size;
  else if (*unit == "hour") period = kHour * bin_size;
  else if (*unit == "day") period = kDay * bin_size;
  else if (*unit == "week" || *unit == "month" || *unit == "quarter" || *unit == "year") period = kDay;
  else return false;
  if (!SpanDivides(rule, period) || kBinsFrom % rule.span_ms != 0) return false;
  Doc wrapped;
  AppendDoc(wrapped.mut(), "$dateTrunc", trunc);
  bson_append_document(out, key, -1, wrapped.get());
  return true;
}

// Appends under `key` what the group key `value` is for every reading of a
// bucket, read from the bucket; false when it may differ within a bucket.
bool AppendBucketKey(const BucketRule& rule, const char* key, const bson_iter_t& value, bson_t* out) {
  if (BSON_ITER_HOLDS_ARRAY(&value)) return false;
  if (BSON_ITER_HOLDS_UTF8(&value)) {
    const std::string_view text = bson_iter_utf8(&value, nullptr);
    if (!text.starts_with("$")) {
      AppendValue(out, key, value);  // a literal
      return true;
    }
    if (text.starts_with("$$")) return false;
    const std::string_view path = text.substr(1);
    if (!PassesThrough(rule, path.substr(0, path.find('.')))) return false;
    AppendValue(out, key, value);  // a meta field: the bucket's value
    return true;
  }
  if (!BSON_ITER_HOLDS_DOCUMENT(&value)) {
    AppendValue(out, key, value);  // a constant
    return true;
  }
  bson_iter_t field;
  bson_iter_t copy = value;
  bson_iter_recurse(&copy, &field);
  if (bson_iter_next(&field) && bson_iter_key(&field)[0] == '$') {
    const std::string op = bson_iter_key(&field);
    const bson_iter_t arg = field;
    if (bson_iter_next(&field)) return false;  // not one operator
    if (op == "$literal") {
      AppendValue(out, key, value);
      return true;
    }
    if (op == "$dateTrunc") return AppendDateTrunc(rule, arg, out, key);
    return AppendDatePart(rule, op, arg, out, key);
  }
  // A document of keys: each must hold for the whole bucket.
  Doc composite;
  bson_iter_recurse(&copy, &field);
  while (bson_iter_next(&field))
    if (!AppendBucketKey(rule, bson_iter_key(&field), field, composite.mut())) return false;
  bson_append_document(out, key, -1, composite.get());
  return true;
}

struct Accumulator {
  enum class Kind { kCount, kSum, kAvg, kMin, kMax };
  std::string name;
  Kind kind = Kind::kCount;
  std::string field;  // the summarised field
  Doc each;           // kCount: {v: what each reading adds}
};

bool IsSummarised(const BucketRule& rule, std::string_view field) {
  return std::any_of(rule.summaries.begin(), rule.summaries.end(),
                     [&](const BucketSummary& s) { return s.field == field; });
}

std::optional<Accumulator> ParseAccumulator(const BucketRule& rule, const bson_iter_t& value) {
  if (!BSON_ITER_HOLDS_DOCUMENT(&value)) return std::nullopt;
  bson_iter_t op;
  bson_iter_t copy = value;
  bson_iter_recurse(&copy, &op);
  if (!bson_iter_next(&op)) return std::nullopt;
  const std::string name = bson_iter_key(&op);
  const bson_iter_t arg = op;
  if (bson_iter_next(&op)) return std::nullopt;
  Accumulator acc;
  if (name == "$count" && BSON_ITER_HOLDS_DOCUMENT(&arg)) {
    BSON_APPEND_INT32(acc.each.mut(), "v", 1);
    return acc;
  }
  if (name == "$sum" && (BSON_ITER_HOLDS_INT32(&arg) || BSON_ITER_HOLDS_INT64(&arg) || BSON_ITER_HOLDS_DOUBLE(&arg))) {
    AppendValue(acc.each.mut(), "v", arg);
    return acc;
  }
  if (!BSON_ITER_HOLDS_UTF8(&arg)) return std::nullopt;
  const std::string_view path = bson_iter_utf8(&arg, nullptr);
  if (!path.starts_with("$") || path.starts_with("$$") || !IsSummarised(rule, path.substr(1))) return std::nullopt;
  acc.field = path.substr(1);
  if (name == "$sum") acc.kind = Accumulator::Kind::kSum;
  else if (name == "$avg") acc.kind = Accumulator::Kind::kAvg;
  else if (name == "$min") acc.kind = Accumulator::Kind::kMin;
  else if (name == "$max") acc.kind = Accumulator::Kind::kMax;
  else return std::nullopt;
  return acc;
}

Doc Operator(std::string_view op, std::string_view operand) {
  Doc doc;
  AppendString(doc.mut(), op, operand);
  return doc;
}

// The number of numeric values of `field` among a bucket's readings:
// {$size: {$filter: {input: "$m", as: "r", cond: null < $$r.f < ""}}} (in
// BSON order the numbers are what lies above null and below every string).
Doc NumericCount(const BucketRule& rule, const std::string& field) {
  const std::string value = "$$r." + field;
  Doc above_null, below_strings, both, filter, size;
  {
    bson_t args;
    bson_append_array_begin(above_null.mut(), "$gt", -1, &args);
    BSON_APPEND_UTF8(&args, "0", value.c_str());
    BSON_APPEND_NULL(&args, "1");
    bson_append_array_end(above_null.mut(), &args);
  }
  {
    bson_t args;
    bson_append_array_begin(below_strings.mut(), "$lt", -1, &args);
    BSON_APPEND_UTF8(&args, "0", value.c_str());
    BSON_APPEND_UTF8(&args, "1", "");
    bson_append_array_end(below_strings.mut(), &args);
  }
  AppendArray(both.mut(), "$and", {above_null, below_strings});
  bson_t spec;
  bson_append_document_begin(filter.mut(), "$filter", -1, &spec);
  BSON_APPEND_UTF8(&spec, "input", ("$" + rule.measurements_field).c_str());
  BSON_APPEND_UTF8(&spec, "as", "r");
  BSON_APPEND_DOCUMENT(&spec, "cond", both.get());
  bson_append_document_end(filter.mut(), &spec);
  AppendDoc(size.mut(), "$size", filter);
  return size;
}

// A name for the $group's count of numeric values of an $avg, unlike any
// output field.
std::string HelperName(const std::vector<Accumulator>& accumulators, size_t i) {
  std::string name = "remold_avg_count_" + std::to_string(i);
  while (std::any_of(accumulators.begin(), accumulators.end(), [&](const Accumulator& a) { return a.name == name; }))
    name += "_";
  return name;
}

}  // namespace

std::optional<GroupPushdown> PushDownGroup(const BucketRule& rule, const std::vector<Doc>& client_stages) {
  size_t at = 0;
  Doc match;
  if (at < client_stages.size()) {
    if (std::optional<Doc> filter = FindDocument(client_stages[at].get(), "$match")) {
      if (WholeBucketFilter(rule, filter->get(), match.mut())) return std::nullopt;
      ++at;
    }
  }
  if (at >= client_stages.size()) return std::nullopt;
  std::optional<Doc> group = FindDocument(client_stages[at].get(), "$group");
  if (!group || bson_count_keys(client_stages[at].get()) != 1) return std::nullopt;

  // Computed with $addFields, where every value is an expression (in a
  // $project, a key of 1 or {a: 1} would be an inclusion).
  Doc project;
  std::vector<Accumulator> accumulators;
  bool has_key = false;
  bson_iter_t field;
  bson_iter_init(&field, group->get());
  while (bson_iter_next(&field)) {
    const std::string name = bson_iter_key(&field);
    if (name == "_id") {
      if (!AppendBucketKey(rule, kKey, field, project.mut())) return std::nullopt;
      has_key = true;
      continue;
    }
    std::optional<Accumulator> acc = ParseAccumulator(rule, field);
    if (!acc) return std::nullopt;
    acc->name = name;
    accumulators.push_back(std::move(*acc));
  }
  if (!has_key) return std::nullopt;  // the backend's error, from the unwinding plan

  // Each bucket's part: a<i> (and c<i> for an $avg).
  const std::string readings = "$" + rule.measurements_field;
  for (size_t i = 0; i < accumulators.size(); ++i) {
    const Accumulator& acc = accumulators[i];
    const std::string a = kPart + std::to_string(i);
    const std::string values = readings + "." + acc.field;
    switch (acc.kind) {
      case Accumulator::Kind::kCount:
        AppendDoc(project.mut(), a, Operator("$size", readings));
        break;
      case Accumulator::Kind::kSum:
      case Accumulator::Kind::kAvg:
        AppendDoc(project.mut(), a, Operator("$sum", values));
        if (acc.kind == Accumulator::Kind::kAvg)
          AppendDoc(project.mut(), kNumbers + std::to_string(i), NumericCount(rule, acc.field));
        break;
      case Accumulator::Kind::kMin:
        AppendDoc(project.mut(), a, Operator("$min", values));
        break;
      case Accumulator::Kind::kMax:
        AppendDoc(project.mut(), a, Operator("$max", values));
        break;
    }
  }

  // The $group over buckets, its outputs in the client's order.
  Doc bucket_group, final_project;
  bool averages = false;
  AppendString(bucket_group.mut(), "_id", std::string("$") + kKey);
  BSON_APPEND_INT32(final_project.mut(), "_id", 1);
  for (size_t i = 0; i < accumulators.size(); ++i) {
    const Accumulator& acc = accumulators[i];
    const std::string a = "$" + (kPart + std::to_string(i));
    switch (acc.kind) {
      case Accumulator::Kind::kCount: {
        const bson_iter_t each = Unboxed(acc.each);
        if (BSON_ITER_HOLDS_INT32(&each) && bson_iter_int32(&each) == 1) {
          AppendDoc(bucket_group.mut(), acc.name, Operator("$sum", a));
        } else {
          Doc product, sum;
          bson_t args;
          bson_append_array_begin(product.mut(), "$multiply", -1, &args);
          AppendValue(&args, "0", each);
          BSON_APPEND_UTF8(&args, "1", a.c_str());
          bson_append_array_end(product.mut(), &args);
          AppendDoc(sum.mut(), "$sum", product);
          AppendDoc(bucket_group.mut(), acc.name, sum);
        }
        BSON_APPEND_INT32(final_project.mut(), acc.name.c_str(), 1);
        break;
      }
      case Accumulator::Kind::kSum:
        AppendDoc(bucket_group.mut(), acc.name, Operator("$sum", a));
        BSON_APPEND_INT32(final_project.mut(), acc.name.c_str(), 1);
        break;
      case Accumulator::Kind::kAvg: {
        const std::string count = HelperName(accumulators, i);
        AppendDoc(bucket_group.mut(), acc.name, Operator("$sum", a));
        AppendDoc(bucket_group.mut(), count, Operator("$sum", "$" + (kNumbers + std::to_string(i))));
        // {$cond: [{$eq: ["$count", 0]}, null, {$divide: ["$name", <"$count", or 1 when 0>]}]}:
        // the division is valid on both branches, since a server may
        // evaluate both (DocumentDB does, and failed on $divide by zero).
        Doc none, divide, cond, denominator;
        {
          bson_t args;
          bson_append_array_begin(none.mut(), "$eq", -1, &args);
          BSON_APPEND_UTF8(&args, "0", ("$" + count).c_str());
          BSON_APPEND_INT32(&args, "1", 0);
          bson_append_array_end(none.mut(), &args);
        }
        {
          bson_t args;
          bson_append_array_begin(denominator.mut(), "$cond", -1, &args);
          BSON_APPEND_DOCUMENT(&args, "0", none.get());
          BSON_APPEND_INT32(&args, "1", 1);
          BSON_APPEND_UTF8(&args, "2", ("$" + count).c_str());
          bson_append_array_end(denominator.mut(), &args);
        }
        {
          bson_t args;
          bson_append_array_begin(divide.mut(), "$divide", -1, &args);
          BSON_APPEND_UTF8(&args, "0", ("$" + acc.name).c_str());
          BSON_APPEND_DOCUMENT(&args, "1", denominator.get());
          bson_append_array_end(divide.mut(), &args);
        }
        bson_t args;
        bson_append_array_begin(cond.mut(), "$cond", -1, &args);
        BSON_APPEND_DOCUMENT(&args, "0", none.get());
        BSON_APPEND_NULL(&args, "1");
        BSON_APPEND_DOCUMENT(&args, "2", divide.get());
        bson_append_array_end(cond.mut(), &args);
        AppendDoc(final_project.mut(), acc.name, cond);
        averages = true;
        break;
      }
      case Accumulator::Kind::kMin:
        AppendDoc(bucket_group.mut(), acc.name, Operator("$min", a));
        BSON_APPEND_INT32(final_project.mut(), acc.name.c_str(), 1);
        break;
      case Accumulator::Kind::kMax:
        AppendDoc(bucket_group.mut(), acc.name, Operator("$max", a));
        BSON_APPEND_INT32(final_project.mut(), acc.name.c_str(), 1);
        break;
    }
  }

  // Buckets holding readings only: an empty one would make a group of none.
  Doc not_empty;
  BSON_APPEND_BOOL(not_empty.mut(), "$exists", true);
  AppendDoc(match.mut(), rule.measurements_field + ".0", not_empty);

  GroupPushdown out;
  out.stages.push_back(Stage("$match", match));
  out.stages.push_back(Stage("$addFields", project));
  out.stages.push_back(Stage("$group", bucket_group));
  if (averages) out.stages.push_back(Stage("$project", final_project));
  out.consumed = at + 1;
  return out;
}

}  // namespace remold
