#include "rewrite/find_as_aggregate.h"

#include "rewrite/cursor_reply.h"

namespace remold {
namespace {


Doc IntegerStage(const char* name, int64_t value) {
  Doc stage;
  BSON_APPEND_INT64(stage.mut(), name, value);
  return stage;
}

// A projection only find has: positional "a.$", or {$elemMatch} or
// {$slice} (an aggregate's $project reads them otherwise, or refuses them).
std::optional<std::string> FindOnlyProjection(const std::optional<Doc>& projection) {
  if (!projection) return std::nullopt;
  bson_iter_t it;
  bson_iter_init(&it, projection->get());
  while (bson_iter_next(&it)) {
    std::string_view key = bson_iter_key(&it);
    std::string_view op;
    if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
      bson_iter_t child, copy = it;
      if (bson_iter_recurse(&copy, &child) && bson_iter_next(&child)) op = bson_iter_key(&child);
    }
    if (key.ends_with(".$") || op == "$elemMatch" || op == "$slice")
      return "projection '" + std::string(key) + "' uses a find-only operator ($slice, $elemMatch or positional $)";
  }
  return std::nullopt;
}

}  // namespace

std::variant<AggregateFind, Refusal> FindAsAggregate(const Command& find, const Namespace& ns,
                                                    FindPipeline parts, const std::string& why_aggregate) {
  const bson_t* body = find.body.get();
  for (const char* unsupported : {"tailable", "awaitData", "min", "max", "returnKey", "showRecordId",
                                  "noCursorTimeout"}) {
    if (auto v = Find(body, unsupported); v && bson_iter_as_bool(&*v))
      return Refusal{error_codes::kInvalidOptions,
                     std::string("find option '") + unsupported + "' is not supported " + why_aggregate};
  }
  if (auto problem = parts.projection_stages ? std::nullopt : FindOnlyProjection(FindDocument(body, "projection")))
    return Refusal{error_codes::kInvalidOptions, *problem + ", which is not supported " + why_aggregate};
  std::vector<Doc> pipeline = std::move(parts.before_view);
  for (Doc& stage : parts.view) pipeline.push_back(std::move(stage));
  if (parts.after_view && !parts.after_view->empty()) pipeline.push_back(Stage("$match", *parts.after_view));
  std::optional<Doc> sort = FindDocument(body, "sort");
  if (sort && !sort->empty()) pipeline.push_back(Stage("$sort", *sort));
  if (auto skip = FindInteger(body, "skip"); skip && *skip > 0) pipeline.push_back(IntegerStage("$skip", *skip));
  int64_t limit = FindInteger(body, "limit").value_or(0);
  AggregateFind out;
  out.single_batch = FindBool(body, "singleBatch").value_or(false) || limit < 0;
  limit = LimitMagnitude(limit);
  if (limit != 0) pipeline.push_back(IntegerStage("$limit", limit));
  std::optional<Doc> projection = FindDocument(body, "projection");
  if (parts.projection_stages) {
    for (Doc& stage : *parts.projection_stages) pipeline.push_back(std::move(stage));
  } else if (projection && !projection->empty()) {
    pipeline.push_back(Stage("$project", *projection));
  }
  bson_t* command = out.command.body.mut();
  AppendString(command, "aggregate", ns.collection);
  AppendArray(command, "pipeline", pipeline);
  Doc cursor;
  if (auto batch = FindInteger(body, "batchSize")) BSON_APPEND_INT64(cursor.mut(), "batchSize", *batch);
  else if (out.single_batch && limit > 0) BSON_APPEND_INT64(cursor.mut(), "batchSize", limit);
  AppendDoc(command, "cursor", cursor);
  for (const char* passthrough : {"collation", "allowDiskUse", "let", "hint"}) {
    if (auto v = Find(body, passthrough)) AppendValue(command, passthrough, *v);
  }
  SealCommand(find, ArgumentTarget::kRead, ns.db, command);
  return out;
}

std::function<ShapedReply(std::span<const Doc>)> SingleBatchShape(const Namespace& ns) {
  return [ns](std::span<const Doc> replies) {
    ShapedReply out;
    int64_t open = 0;
    out.reply = WithCursor(replies.front(), std::nullopt, 0, &open);
    if (open != 0) out.cursors_to_kill.push_back(open);
    out.kill_db = ns.db;
    out.kill_collection = ns.collection;
    return out;
  };
}

}  // namespace remold
