// delete on a bucketed namespace: whole buckets only.
//
// A delete whose filter names only meta fields and a time range on bucket
// boundaries (at the top level or inside $and, nested too) removes exactly the buckets it covers; `n` is the number of
// measurements they held, counted just before each statement's delete. A filter that
// would cut through a bucket (or names other fields) is refused with a
// clear error rather than trimming the bucket and its summaries.
#include <algorithm>
#include <string>
#include <vector>

#include "patterns/bucket/rewrite.h"
#include "patterns/bucket/pushdown.h"
#include "patterns/bucket/whole_buckets.h"

namespace remold {
namespace {

BackendCommand CountCommand(const Command& command, const BucketRule& rule, const Doc& filter,
                            const std::optional<bson_iter_t>& collation) {
  BackendCommand count;
  bson_t* body = count.body.mut();
  AppendString(body, "aggregate", rule.buckets.collection);
  Doc match, group, sum, group_stage;
  AppendDoc(match.mut(), "$match", filter);
  BSON_APPEND_NULL(group.mut(), "_id");
  AppendString(sum.mut(), "$sum", std::string("$") + BucketRule::kCountField);
  AppendDoc(group.mut(), "n", sum);
  AppendDoc(group_stage.mut(), "$group", group);
  AppendArray(body, "pipeline", {match, group_stage});
  AppendDoc(body, "cursor", Doc());
  if (collation) AppendValue(body, "collation", *collation);
  SealCommand(command, ArgumentTarget::kRead, rule.buckets.db, body);
  return count;
}

BackendCommand DeleteCommand(const Command& command, const BucketRule& rule, const Doc& filter,
                             const std::optional<bson_iter_t>& collation) {
  Doc statement;
  AppendDoc(statement.mut(), "q", filter);
  BSON_APPEND_INT32(statement.mut(), "limit", 0);
  if (collation) AppendValue(statement.mut(), "collation", *collation);
  BackendCommand del;
  bson_t* body = del.body.mut();
  AppendString(body, "delete", rule.buckets.collection);
  AppendArray(body, "deletes", {statement});
  SealCommand(command, ArgumentTarget::kWrite, rule.buckets.db, body);
  return del;
}

int64_t CountFrom(const Doc& reply) {
  auto cursor = FindDocument(reply.get(), "cursor");
  auto batch = cursor ? Find(cursor->get(), "firstBatch") : std::nullopt;
  std::vector<Doc> docs = batch ? ArrayDocuments(*batch) : std::vector<Doc>();
  return docs.empty() ? 0 : FindInteger(docs.front().get(), "n").value_or(0);
}

// Replies come in (count, delete) pairs, one pair per client statement; an
// ordered delete stops at the first statement with a write error.
ShapedReply ShapeDelete(std::span<const Doc> replies) {
  ShapedReply out;
  int64_t n = 0;
  std::vector<Doc> errors;
  for (size_t pair = 0; 2 * pair + 1 < replies.size(); ++pair) {
    const Doc& deleted = replies[2 * pair + 1];
    auto we = Find(deleted.get(), "writeErrors");
    if (!we || !BSON_ITER_HOLDS_ARRAY(&*we)) {
      n += CountFrom(replies[2 * pair]);
      continue;
    }
    for (const Doc& e : ArrayDocuments(*we)) {  // re-index to the client's statement
      Doc error;
      BSON_APPEND_INT32(error.mut(), "index", static_cast<int32_t>(pair));
      bson_iter_t it;
      bson_iter_init(&it, e.get());
      while (bson_iter_next(&it))
        if (std::string_view(bson_iter_key(&it)) != "index") AppendValue(error.mut(), bson_iter_key(&it), it);
      errors.push_back(std::move(error));
    }
  }
  if (n <= INT32_MAX) BSON_APPEND_INT32(out.reply.mut(), "n", static_cast<int32_t>(n));
  else BSON_APPEND_INT64(out.reply.mut(), "n", n);
  if (!errors.empty()) AppendArray(out.reply.mut(), "writeErrors", errors);
  const Doc& last = replies.back();
  for (const char* key : {"writeConcernError", "$clusterTime", "operationTime"}) {
    if (auto v = Find(last.get(), key)) AppendValue(out.reply.mut(), key, *v);
  }
  BSON_APPEND_DOUBLE(out.reply.mut(), "ok", 1.0);
  return out;
}

}  // namespace

Plan RewriteBucketDelete(const Command& command, const BucketRule& rule, const std::string& who) {
  auto deletes = Find(command.body.get(), "deletes");
  if (!deletes || !BSON_ITER_HOLDS_ARRAY(&*deletes))
    return ImmediateReply(ErrorReply(error_codes::kFailedToParse, "delete needs a 'deletes' array"));
  std::vector<Doc> statements = ArrayDocuments(*deletes);
  if (statements.empty())
    return ImmediateReply(ErrorReply(error_codes::kInvalidLength,
                                     "Write batch sizes must be between 1 and 100000. Got 0 operations."));
  if (statements.size() > 1 && Find(command.body.get(), "txnNumber"))
    return ImmediateReply(ErrorReply(error_codes::kInvalidOptions,
        who + ": a retryable delete on a bucketed "
        "collection must have one statement; send the deletes one by one"));
  Plan plan;
  for (const Doc& statement : statements) {
    if (FindInteger(statement.get(), "limit").value_or(0) != 0)
      return ImmediateReply(ErrorReply(error_codes::kInvalidOptions,
          who + ": deleteOne is not supported; readings are "
          "deleted by whole buckets with deleteMany on meta fields and a bucket-aligned time range"));
    Doc q = FindDocument(statement.get(), "q").value_or(Doc());
    Doc filter;
    if (auto error = WholeBucketFilter(rule, q.get(), filter.mut()))
      return ImmediateReply(ErrorReply(error_codes::kInvalidOptions,
                                       who + ": " + *error));
    // Count the readings about to go (the client's n), then delete them.
    std::optional<bson_iter_t> collation = Find(statement.get(), "collation");
    plan.commands.push_back(CountCommand(command, rule, filter, collation));
    plan.commands.push_back(DeleteCommand(command, rule, filter, collation));
  }
  plan.stop_on_write_errors = FindBool(command.body.get(), "ordered").value_or(true);
  plan.shape = ShapeDelete;
  return plan;
}

}  // namespace remold
