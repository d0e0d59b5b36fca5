// drop of a followed collection. Dropping the documents behind the
// followers' backs would leave what follows them (counts, sums, extremes,
// embedded copies) standing for documents that no longer exist, so the
// collection is dropped only when it is empty: remold reads one _id first
// and refuses (InvalidOptions) when there is one, saying to delete the
// documents first (a deleteMany is followed).
#include "patterns/source_writes/source_write.h"

namespace remold {

std::optional<Plan> FollowedDrop(const Command& command, const Namespace& source, const std::string& refusal) {
  BackendCommand find;
  bson_t* b = find.body.mut();
  AppendString(b, "find", source.collection);
  AppendDoc(b, "filter", Doc());
  Doc id_only;
  BSON_APPEND_INT32(id_only.mut(), "_id", 1);
  AppendDoc(b, "projection", id_only);
  BSON_APPEND_INT32(b, "limit", 1);
  BSON_APPEND_BOOL(b, "singleBatch", true);
  SealCommand(command, ArgumentTarget::kRead, source.db, b);

  auto has_documents = [](const Doc& reply) {
    auto cursor = FindDocument(reply.get(), "cursor");
    auto batch = cursor ? Find(cursor->get(), "firstBatch") : std::nullopt;
    return batch && !ArrayDocuments(*batch).empty();
  };
  const Doc client = command.body;
  Plan plan;
  plan.commands.push_back(std::move(find));
  plan.then = [client, has_documents](std::span<const Doc> replies) {
    Step next;
    if (!IsOkReply(replies.front()) || has_documents(replies.front())) return next;
    BackendCommand drop;
    drop.body = client;  // the client's drop as it is
    next.commands.push_back(std::move(drop));
    return next;
  };
  plan.shape = [refusal](std::span<const Doc> replies) {
    ShapedReply out;
    if (replies.size() >= 2) out.reply = replies.back();  // the backend's answer to the drop
    else if (!IsOkReply(replies.front())) out.reply = replies.front();
    else out.reply = ErrorReply(error_codes::kInvalidOptions, refusal);
    return out;
  };
  return plan;
}

}  // namespace remold
