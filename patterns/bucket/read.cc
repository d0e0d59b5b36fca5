// Reads on a bucketed namespace: find, aggregate, count, distinct, getMore
// and killCursors, served from the buckets by unpacking (see bucket.h).
//
// Every read becomes an aggregate on the bucket collection:
//   [$match <pushdown>]  $unwind m  $replaceRoot {$mergeObjects: [{_id}, {<meta>}, m]}
// followed by the client's own filter, sort, skip, limit, projection or
// pipeline. Cursors carry the logical namespace back to the client, so its
// getMore and killCursors come back to the logical name and are redirected.
#include <string>
#include <vector>

#include "patterns/bucket/group_pushdown.h"
#include "patterns/bucket/rewrite.h"
#include "patterns/bucket/pushdown.h"
#include "rewrite/cursor_reply.h"
#include "rewrite/distinct_reply.h"
#include "rewrite/stored_elsewhere.h"

namespace remold {
namespace {



// The bucket-level predicates that `filter` allows, then the view.
std::vector<Doc> UnpackStages(const BucketRule& rule, const bson_t* filter) {
  std::vector<Doc> stages;
  if (filter) {
    Doc pushdown = BucketPushdown(rule, filter);
    if (!pushdown.empty()) stages.push_back(Stage("$match", pushdown));
  }
  for (Doc& stage : ViewStages(rule)) stages.push_back(std::move(stage));
  return stages;
}

void AppendFilterStage(std::vector<Doc>& stages, const std::optional<Doc>& filter) {
  if (filter && !filter->empty()) stages.push_back(Stage("$match", *filter));
}

void AppendIntegerStage(std::vector<Doc>& stages, std::string_view name, int64_t value) {
  Doc stage;
  BSON_APPEND_INT64(stage.mut(), std::string(name).c_str(), value);
  stages.push_back(std::move(stage));
}

bool EndsWithWriteStage(const std::vector<Doc>& pipeline) {
  if (pipeline.empty()) return false;
  const bson_t* last = pipeline.back().get();
  return Find(last, "$out").has_value() || Find(last, "$merge").has_value();
}

BackendCommand AggregateCommand(const Command& command, const BucketRule& rule,
                                const std::vector<Doc>& pipeline, const Doc& cursor) {
  BackendCommand backend;
  bson_t* body = backend.body.mut();
  AppendString(body, "aggregate", rule.buckets.collection);
  AppendArray(body, "pipeline", pipeline);
  AppendDoc(body, "cursor", cursor);
  // "hint" names logical indexes that do not exist on buckets: not forwarded.
  for (const char* passthrough : {"collation", "allowDiskUse", "let"}) {
    if (auto v = Find(command.body.get(), passthrough)) AppendValue(body, passthrough, *v);
  }
  CopyGenericArguments(command, ArgumentTarget::kRead, body);
  if (EndsWithWriteStage(pipeline)) {
    // $out / $merge write: the client's write arguments apply to them.
    for (const char* write_arg : {"writeConcern", "bypassDocumentValidation"}) {
      if (auto v = Find(command.body.get(), write_arg)) AppendValue(body, write_arg, *v);
    }
  }
  AppendString(body, "$db", rule.buckets.db);
  return backend;
}

Doc WithLogicalNamespace(const Doc& reply, const BucketRule& rule) {
  return WithCursor(reply, rule.logical.full(), std::nullopt);
}

// The first batch's first document, for count and distinct.
std::optional<Doc> FirstResult(const Doc& reply) {
  auto cursor = FindDocument(reply.get(), "cursor");
  if (!cursor) return std::nullopt;
  auto batch = Find(cursor->get(), "firstBatch");
  if (!batch || !BSON_ITER_HOLDS_ARRAY(&*batch)) return std::nullopt;
  std::vector<Doc> docs = ArrayDocuments(*batch);
  if (docs.empty()) return std::nullopt;
  return docs.front();
}

Plan Refuse(const std::string& who, const std::string& what) {
  return ImmediateReply(ErrorReply(error_codes::kInvalidOptions, who + ": " + what));
}

// The find-only projection operators ($slice, $elemMatch, positional $) of
// a find's projection, if any: an aggregate $project reads them otherwise
// (or not at all), so they cannot follow the unpacking stages as they are.
std::optional<std::string> FindOnlyProjectionOperator(const bson_t* projection) {
  bson_iter_t it;
  bson_iter_init(&it, projection);
  while (bson_iter_next(&it)) {
    std::string_view key = bson_iter_key(&it);
    if (key == "$" || key.ends_with(".$") || key.find(".$.") != std::string_view::npos)
      return "positional '$' (in '" + std::string(key) + "')";
    if (!BSON_ITER_HOLDS_DOCUMENT(&it)) continue;
    bson_iter_t op;
    bson_iter_recurse(&it, &op);
    while (bson_iter_next(&op)) {
      std::string_view name = bson_iter_key(&op);
      if (name == "$slice" || name == "$elemMatch")
        return "'" + std::string(name) + "' (on '" + std::string(key) + "')";
    }
  }
  return std::nullopt;
}

}  // namespace

std::vector<Doc> ViewStages(const BucketRule& rule) {
  std::vector<Doc> stages;
  Doc unwind;
  AppendString(unwind.mut(), "$unwind", "$" + rule.measurements_field);
  stages.push_back(std::move(unwind));
  // newRoot: the measurement with the bucket's meta fields merged in, its
  // _id first as MongoDB returns it (a missing field stays missing).
  Doc root;
  const std::string measurement = "$" + rule.measurements_field;
  if (rule.meta_fields.empty()) {
    AppendString(root.mut(), "newRoot", measurement);
  } else {
    Doc id, meta;
    AppendString(id.mut(), "_id", measurement + "._id");
    for (const auto& field : rule.meta_fields) AppendString(meta.mut(), field, "$" + field);
    bson_t new_root, merge;
    BSON_APPEND_DOCUMENT_BEGIN(root.mut(), "newRoot", &new_root);
    BSON_APPEND_ARRAY_BEGIN(&new_root, "$mergeObjects", &merge);
    BSON_APPEND_DOCUMENT(&merge, "0", id.get());
    BSON_APPEND_DOCUMENT(&merge, "1", meta.get());
    BSON_APPEND_UTF8(&merge, "2", measurement.c_str());
    bson_append_array_end(&new_root, &merge);
    bson_append_document_end(root.mut(), &new_root);
  }
  stages.push_back(Stage("$replaceRoot", root));
  return stages;
}


Plan RewriteBucketFind(const Command& command, const BucketRule& rule, const std::string& who) {
  const bson_t* body = command.body.get();
  for (const char* unsupported : {"tailable", "awaitData", "min", "max", "returnKey",
                                  "showRecordId", "oplogReplay", "noCursorTimeout"}) {
    if (auto v = Find(body, unsupported); v && !(BSON_ITER_HOLDS_BOOL(&*v) && !bson_iter_bool(&*v)))
      return Refuse(who, std::string("find option '") + unsupported +
                              "' is not supported on a bucketed collection");
  }
  std::optional<Doc> projection = FindDocument(body, "projection");
  if (projection) {
    if (auto op = FindOnlyProjectionOperator(projection->get()))
      return Refuse(who, "the find projection operator " + *op + " is not supported on a "
                          "bucketed collection; project the field and slice or match the array "
                          "in the application, or use an aggregate");
  }
  std::optional<Doc> filter = FindDocument(body, "filter");
  std::vector<Doc> pipeline = UnpackStages(rule, filter ? filter->get() : nullptr);
  AppendFilterStage(pipeline, filter);
  if (auto sort = FindDocument(body, "sort"); sort && !sort->empty())
    pipeline.push_back(Stage("$sort", *sort));
  int64_t skip = FindInteger(body, "skip").value_or(0);
  int64_t limit = FindInteger(body, "limit").value_or(0);
  bool single_batch = FindBool(body, "singleBatch").value_or(false);
  if (limit < 0) {
    limit = LimitMagnitude(limit);
    single_batch = true;
  }
  if (skip < 0) return ImmediateReply(ErrorReply(error_codes::kFailedToParse, "skip must be >= 0"));
  if (skip > 0) AppendIntegerStage(pipeline, "$skip", skip);
  if (limit > 0) AppendIntegerStage(pipeline, "$limit", limit);
  if (projection && !projection->empty()) pipeline.push_back(Stage("$project", *projection));

  Doc cursor;
  if (auto batch = FindInteger(body, "batchSize")) BSON_APPEND_INT64(cursor.mut(), "batchSize", *batch);
  else if (single_batch && limit > 0) BSON_APPEND_INT64(cursor.mut(), "batchSize", limit);

  Plan plan;
  plan.commands.push_back(AggregateCommand(command, rule, pipeline, cursor));
  plan.shape = [rule, single_batch](std::span<const Doc> replies) {
    ShapedReply out;
    int64_t id = 0;
    out.reply = WithCursor(replies.front(), rule.logical.full(), std::nullopt, &id);
    if (single_batch && id != 0) {
      // The client asked for one batch: report id 0 and close the rest.
      out.reply = WithCursor(replies.front(), rule.logical.full(), 0);
      out.cursors_to_kill.push_back(id);
      out.kill_db = rule.buckets.db;
      out.kill_collection = rule.buckets.collection;
    }
    return out;
  };
  return plan;
}

Plan RewriteBucketAggregate(const Command& command, const BucketRule& rule,
                            const std::string& who) {
  const bson_t* body = command.body.get();
  auto pipeline_iter = Find(body, "pipeline");
  if (!pipeline_iter || !BSON_ITER_HOLDS_ARRAY(&*pipeline_iter))
    return ImmediateReply(ErrorReply(error_codes::kFailedToParse, "aggregate needs a 'pipeline' array"));
  std::vector<Doc> client_stages = ArrayDocuments(*pipeline_iter);
  if (Find(body, "explain"))
    return Refuse(who, "aggregate with explain is not supported on a bucketed collection");
  std::vector<Doc> pipeline;
  if (std::optional<GroupPushdown> pushed = PushDownGroup(rule, client_stages)) {
    // A $group the buckets answer without unwinding their readings.
    pipeline = std::move(pushed->stages);
    for (size_t i = pushed->consumed; i < client_stages.size(); ++i) pipeline.push_back(std::move(client_stages[i]));
  } else {
    // A leading $match narrows which buckets are read.
    std::optional<Doc> leading_match;
    if (!client_stages.empty()) leading_match = FindDocument(client_stages.front().get(), "$match");
    pipeline = UnpackStages(rule, leading_match ? leading_match->get() : nullptr);
    for (auto& stage : client_stages) pipeline.push_back(std::move(stage));
  }
  Doc cursor = FindDocument(body, "cursor").value_or(Doc());

  Plan plan;
  plan.commands.push_back(AggregateCommand(command, rule, pipeline, cursor));
  plan.shape = [rule](std::span<const Doc> replies) {
    ShapedReply out;
    out.reply = WithLogicalNamespace(replies.front(), rule);
    return out;
  };
  return plan;
}

Plan RewriteBucketCount(const Command& command, const BucketRule& rule) {
  const bson_t* body = command.body.get();
  std::optional<Doc> query = FindDocument(body, "query");
  int64_t skip = FindInteger(body, "skip").value_or(0);
  int64_t limit = FindInteger(body, "limit").value_or(0);
  limit = LimitMagnitude(limit);
  std::vector<Doc> pipeline;
  if ((!query || query->empty()) && skip == 0 && limit == 0) {
    // Every measurement: the buckets' counts add up without unpacking.
    Doc sum, group;
    BSON_APPEND_NULL(group.mut(), "_id");
    AppendString(sum.mut(), "$sum", std::string("$") + BucketRule::kCountField);
    AppendDoc(group.mut(), "n", sum);
    pipeline.push_back(Stage("$group", group));
  } else {
    pipeline = UnpackStages(rule, query ? query->get() : nullptr);
    AppendFilterStage(pipeline, query);
    if (skip > 0) AppendIntegerStage(pipeline, "$skip", skip);
    if (limit > 0) AppendIntegerStage(pipeline, "$limit", limit);
    Doc count;
    AppendString(count.mut(), "$count", "n");
    pipeline.push_back(std::move(count));
  }
  Plan plan;
  plan.commands.push_back(AggregateCommand(command, rule, pipeline, Doc()));
  plan.shape = [](std::span<const Doc> replies) {
    ShapedReply out;
    std::optional<Doc> first = FirstResult(replies.front());
    int64_t n = first ? FindInteger(first->get(), "n").value_or(0) : 0;
    if (n <= INT32_MAX) BSON_APPEND_INT32(out.reply.mut(), "n", static_cast<int32_t>(n));
    else BSON_APPEND_INT64(out.reply.mut(), "n", n);
    CopyClusterFields(replies.front(), out.reply.mut());
    BSON_APPEND_DOUBLE(out.reply.mut(), "ok", 1.0);
    return out;
  };
  return plan;
}

Plan RewriteBucketDistinct(const Command& command, const BucketRule& rule) {
  const bson_t* body = command.body.get();
  std::optional<std::string> key = FindString(body, "key");
  if (!key || key->empty())
    return ImmediateReply(ErrorReply(error_codes::kFailedToParse, "distinct needs a 'key' string"));
  std::optional<Doc> query = FindDocument(body, "query");
  std::vector<Doc> pipeline = UnpackStages(rule, query ? query->get() : nullptr);
  AppendFilterStage(pipeline, query);
  for (Doc& stage : DistinctStages(*key)) pipeline.push_back(std::move(stage));

  Plan plan;
  plan.commands.push_back(AggregateCommand(command, rule, pipeline, Doc()));
  plan.shape = [](std::span<const Doc> replies) {
    ShapedReply out;
    std::optional<Doc> first = FirstResult(replies.front());
    std::optional<bson_iter_t> values;
    if (first) values = Find(first->get(), "values");
    if (values) AppendValue(out.reply.mut(), "values", *values);
    else {
      bson_t empty;
      BSON_APPEND_ARRAY_BEGIN(out.reply.mut(), "values", &empty);
      bson_append_array_end(out.reply.mut(), &empty);
    }
    CopyClusterFields(replies.front(), out.reply.mut());
    BSON_APPEND_DOUBLE(out.reply.mut(), "ok", 1.0);
    return out;
  };
  return plan;
}

BackendCommand RedirectedToBuckets(const Command& command, const BucketRule& rule,
                                   std::string_view collection_key) {
  BackendCommand backend;
  bson_t* body = backend.body.mut();
  bson_iter_t it;
  bson_iter_init(&it, command.body.get());
  while (bson_iter_next(&it)) {
    std::string_view key = bson_iter_key(&it);
    if (key == collection_key) AppendString(body, key, rule.buckets.collection);
    else if (key == "$db") AppendString(body, "$db", rule.buckets.db);
    else AppendValue(body, key, it);
  }
  return backend;
}

Plan RewriteBucketGetMore(const Command& command, const BucketRule& rule) {
  Plan plan;
  plan.commands.push_back(RedirectedToBuckets(command, rule, "collection"));
  plan.shape = [rule](std::span<const Doc> replies) {
    ShapedReply out;
    out.reply = WithLogicalNamespace(replies.front(), rule);
    return out;
  };
  return plan;
}

Plan RewriteBucketKillCursors(const Command& command, const BucketRule& rule) {
  Plan plan;
  plan.commands.push_back(RedirectedToBuckets(command, rule, "killCursors"));
  plan.shape = [](std::span<const Doc> replies) { return ShapedReply{replies.front(), {}, {}, {}, {}, {}}; };
  return plan;
}

}  // namespace remold
