// delete on a bucketed namespace: whole buckets only.
//
// A delete whose filter names only meta fields and a time range on bucket
// boundaries removes exactly the buckets it covers; `n` is the number of
// measurements they held, counted just before the delete. A filter that
// would cut through a bucket (or names other fields) is refused with a
// clear error rather than trimming the bucket and its summaries.
#include <algorithm>
#include <string>
#include <vector>

#include "rewrite/bucket.h"
#include "rewrite/bucket_pushdown.h"

namespace remold {
namespace {

constexpr int kIllegalOperation = 20;

bool IsMeta(const BucketRule& rule, std::string_view key) {
  return std::find(rule.meta_fields.begin(), rule.meta_fields.end(), key) != rule.meta_fields.end();
}

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

std::optional<std::string> BucketFilter(const BucketRule& rule, const bson_t* q, bson_t* out) {
  bson_iter_t it;
  bson_iter_init(&it, q);
  while (bson_iter_next(&it)) {
    std::string_view key = bson_iter_key(&it);
    if (IsMeta(rule, key)) {
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

}  // namespace

Plan RewriteBucketDelete(const Command& command, const BucketRule& rule) {
  auto deletes = Find(command.body.get(), "deletes");
  if (!deletes || !BSON_ITER_HOLDS_ARRAY(&*deletes))
    return ImmediateReply(ErrorReply(9, "FailedToParse", "delete needs a 'deletes' array"));
  std::vector<Doc> statements;
  Plan plan;
  for (const Doc& statement : ArrayDocuments(*deletes)) {
    if (FindInteger(statement.get(), "limit").value_or(0) != 0)
      return ImmediateReply(ErrorReply(
          kIllegalOperation, "IllegalOperation",
          "bucket rule for " + rule.logical.full() + ": deleteOne is not supported; readings are "
          "deleted by whole buckets with deleteMany on meta fields and a bucket-aligned time range"));
    Doc q = FindDocument(statement.get(), "q").value_or(Doc());
    Doc filter;
    if (auto error = BucketFilter(rule, q.get(), filter.mut()))
      return ImmediateReply(ErrorReply(kIllegalOperation, "IllegalOperation",
                                       "bucket rule for " + rule.logical.full() + ": " + *error));
    // Count the measurements about to go, for the client's n.
    BackendCommand count;
    bson_t* body = count.body.mut();
    AppendString(body, "aggregate", rule.buckets.collection);
    Doc match, group, sum;
    AppendDoc(match.mut(), "$match", filter);
    BSON_APPEND_NULL(group.mut(), "_id");
    AppendString(sum.mut(), "$sum", std::string("$") + BucketRule::kCountField);
    AppendDoc(group.mut(), "n", sum);
    Doc group_stage;
    AppendDoc(group_stage.mut(), "$group", group);
    AppendArray(body, "pipeline", {match, group_stage});
    AppendDoc(body, "cursor", Doc());
    CopyGenericArguments(command, ArgumentTarget::kRead, body);
    AppendString(body, "$db", rule.buckets.db);
    plan.commands.push_back(std::move(count));

    Doc backend_statement;
    AppendDoc(backend_statement.mut(), "q", filter);
    BSON_APPEND_INT32(backend_statement.mut(), "limit", 0);
    statements.push_back(std::move(backend_statement));
  }
  const size_t counted = statements.size();
  BackendCommand del;
  bson_t* body = del.body.mut();
  AppendString(body, "delete", rule.buckets.collection);
  AppendArray(body, "deletes", statements);
  if (auto ordered = Find(command.body.get(), "ordered")) AppendValue(body, "ordered", *ordered);
  CopyGenericArguments(command, ArgumentTarget::kWrite, body);
  AppendString(body, "$db", rule.buckets.db);
  plan.commands.push_back(std::move(del));

  plan.shape = [counted](std::span<const Doc> replies) {
    ShapedReply out;
    const Doc& result = replies.back();
    if (replies.size() != counted + 1) return ShapedReply{result, {}, {}, {}};
    std::vector<bool> failed(counted, false);
    if (auto we = Find(result.get(), "writeErrors"); we && BSON_ITER_HOLDS_ARRAY(&*we)) {
      for (const Doc& e : ArrayDocuments(*we)) {
        auto index = FindInteger(e.get(), "index");
        if (index && *index >= 0 && static_cast<size_t>(*index) < counted) failed[*index] = true;
      }
    }
    int64_t n = 0;
    for (size_t i = 0; i < counted; ++i) {
      if (failed[i]) continue;
      auto cursor = FindDocument(replies[i].get(), "cursor");
      auto batch = cursor ? Find(cursor->get(), "firstBatch") : std::nullopt;
      std::vector<Doc> docs = batch ? ArrayDocuments(*batch) : std::vector<Doc>();
      if (!docs.empty()) n += FindInteger(docs.front().get(), "n").value_or(0);
    }
    bson_iter_t it;
    bson_iter_init(&it, result.get());
    while (bson_iter_next(&it)) {
      std::string_view key = bson_iter_key(&it);
      if (key == "n") BSON_APPEND_INT64(out.reply.mut(), "n", n);
      else AppendValue(out.reply.mut(), key, it);
    }
    return out;
  };
  return plan;
}

}  // namespace remold
