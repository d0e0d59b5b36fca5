#include "rewrite/count_reply.h"

#include <cstdint>

#include "rewrite/cursor_reply.h"

namespace remold {

std::vector<Doc> CountStages(const bson_t* count) {
  std::vector<Doc> stages;
  if (auto skip = FindInteger(count, "skip"); skip && *skip > 0) {
    Doc stage;
    BSON_APPEND_INT64(stage.mut(), "$skip", *skip);
    stages.push_back(std::move(stage));
  }
  if (auto limit = FindInteger(count, "limit"); limit && *limit != 0) {
    Doc stage;
    BSON_APPEND_INT64(stage.mut(), "$limit", LimitMagnitude(*limit));
    stages.push_back(std::move(stage));
  }
  Doc stage;
  AppendString(stage.mut(), "$count", "n");
  stages.push_back(std::move(stage));
  return stages;
}

ShapedReply CountReply(std::span<const Doc> replies) {
  const Doc& reply = replies.front();
  if (!IsOkReply(reply)) return ShapedReply{reply, {}, {}, {}, {}, {}};
  ShapedReply out;
  std::vector<Doc> batch = FirstBatch(reply);
  const int64_t n = batch.empty() ? 0 : FindInteger(batch.front().get(), "n").value_or(0);
  if (n <= INT32_MAX) BSON_APPEND_INT32(out.reply.mut(), "n", static_cast<int32_t>(n));
  else BSON_APPEND_INT64(out.reply.mut(), "n", n);
  for (const char* key : {"$clusterTime", "operationTime"})
    if (auto v = Find(reply.get(), key)) AppendValue(out.reply.mut(), key, *v);
  BSON_APPEND_DOUBLE(out.reply.mut(), "ok", 1.0);
  return out;
}

}  // namespace remold
