#include "patterns/bucket/pushdown.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace remold {
namespace {

bool IsMeta(const BucketRule& rule, std::string_view key) {
  return std::find(rule.meta_fields.begin(), rule.meta_fields.end(), key) != rule.meta_fields.end();
}

const BucketSummary* SummaryOf(const BucketRule& rule, std::string_view key) {
  for (const auto& s : rule.summaries)
    if (s.field == key) return &s;
  return nullptr;
}

// A number the summaries can bound. NaN is not: a query matches NaN only
// with NaN, and summaries leave NaN out. Decimal128 values are refused at
// insert, so summaries never hold them.
bool IsNumber(const bson_iter_t& it) {
  if (BSON_ITER_HOLDS_DOUBLE(&it)) return !std::isnan(bson_iter_double(&it));
  return BSON_ITER_HOLDS_INT32(&it) || BSON_ITER_HOLDS_INT64(&it);
}

// Conjuncts are collected as single-key documents and joined at the end.
using Conjuncts = std::vector<Doc>;

void AddConjunct(Conjuncts& out, std::string_view field, std::string_view op, const bson_iter_t& v) {
  Doc inner;
  AppendValue(inner.mut(), op, v);
  Doc outer;
  AppendDoc(outer.mut(), field, inner);
  out.push_back(std::move(outer));
}

void AddDateConjunct(Conjuncts& out, std::string_view field, std::string_view op, int64_t ms) {
  Doc inner;
  bson_append_date_time(inner.mut(), op.data(), static_cast<int>(op.size()), ms);
  Doc outer;
  AppendDoc(outer.mut(), field, inner);
  out.push_back(std::move(outer));
}

void PushTime(const BucketRule& rule, const bson_iter_t& value, Conjuncts& out) {
  const std::string& bt = rule.bucket_time_field;
  if (BSON_ITER_HOLDS_DATE_TIME(&value)) {
    AddDateConjunct(out, bt, "$eq", BucketStart(rule, bson_iter_date_time(&value)));
    return;
  }
  if (!BSON_ITER_HOLDS_DOCUMENT(&value)) return;
  ForEachChild(value, [&](std::string_view name, const bson_iter_t& op) {
    if (!BSON_ITER_HOLDS_DATE_TIME(&op)) return;
    int64_t t = bson_iter_date_time(&op);
    if (name == "$gte" || name == "$gt") AddDateConjunct(out, bt, "$gte", BucketStart(rule, t));
    else if (name == "$lt") AddDateConjunct(out, bt, "$lt", t);
    else if (name == "$lte") AddDateConjunct(out, bt, "$lte", t);
    else if (name == "$eq") AddDateConjunct(out, bt, "$eq", BucketStart(rule, t));
  });
}

void PushSummary(const BucketSummary& summary, const bson_iter_t& value, Conjuncts& out) {
  const std::string max_path = std::string(BucketRule::kMaxField) + "." + summary.field;
  const std::string min_path = std::string(BucketRule::kMinField) + "." + summary.field;
  if (IsNumber(value)) {  // equality: min <= v <= max
    if (summary.max) AddConjunct(out, max_path, "$gte", value);
    if (summary.min) AddConjunct(out, min_path, "$lte", value);
    return;
  }
  if (!BSON_ITER_HOLDS_DOCUMENT(&value)) return;
  ForEachChild(value, [&](std::string_view name, const bson_iter_t& op) {
    if (!IsNumber(op)) return;
    if ((name == "$gt" || name == "$gte") && summary.max) AddConjunct(out, max_path, name, op);
    else if ((name == "$lt" || name == "$lte") && summary.min) AddConjunct(out, min_path, name, op);
    else if (name == "$eq") {
      if (summary.max) AddConjunct(out, max_path, "$gte", op);
      if (summary.min) AddConjunct(out, min_path, "$lte", op);
    }
  });
}

Doc Join(Conjuncts conjuncts) {
  if (conjuncts.empty()) return Doc();
  if (conjuncts.size() == 1) return std::move(conjuncts[0]);
  Doc out;
  AppendArray(out.mut(), "$and", conjuncts);
  return out;
}

Conjuncts Collect(const BucketRule& rule, const bson_t* filter);

// Each branch of an $or must narrow, or the $or cannot be pushed down.
void PushOr(const BucketRule& rule, const bson_iter_t& value, Conjuncts& out) {
  std::vector<Doc> branches;
  for (const Doc& branch : ArrayDocuments(value)) {
    Conjuncts pushed = Collect(rule, branch.get());
    if (pushed.empty()) return;
    branches.push_back(Join(std::move(pushed)));
  }
  if (branches.empty()) return;
  Doc doc;
  AppendArray(doc.mut(), "$or", branches);
  out.push_back(std::move(doc));
}

Conjuncts Collect(const BucketRule& rule, const bson_t* filter) {
  Conjuncts out;
  bson_iter_t it;
  if (!bson_iter_init(&it, filter)) return out;
  while (bson_iter_next(&it)) {
    std::string_view key = bson_iter_key(&it);
    if (key == "$and" && BSON_ITER_HOLDS_ARRAY(&it)) {
      for (const Doc& sub : ArrayDocuments(it)) {
        Conjuncts pushed = Collect(rule, sub.get());
        for (auto& c : pushed) out.push_back(std::move(c));
      }
    } else if (key == "$or" && BSON_ITER_HOLDS_ARRAY(&it)) {
      PushOr(rule, it, out);
    } else if (IsMeta(rule, key)) {
      Doc doc;
      AppendValue(doc.mut(), key, it);
      out.push_back(std::move(doc));
    } else if (key == rule.time_field) {
      PushTime(rule, it, out);
    } else if (const BucketSummary* summary = SummaryOf(rule, key)) {
      PushSummary(*summary, it, out);
    }
  }
  return out;
}

}  // namespace

int64_t BucketStart(const BucketRule& rule, int64_t time_ms) {
  int64_t q = time_ms / rule.span_ms;
  if (time_ms % rule.span_ms < 0) --q;
  if (q < std::numeric_limits<int64_t>::min() / rule.span_ms) return std::numeric_limits<int64_t>::min();
  return q * rule.span_ms;
}

Doc BucketPushdown(const BucketRule& rule, const bson_t* filter) {
  return Join(Collect(rule, filter));
}

}  // namespace remold
