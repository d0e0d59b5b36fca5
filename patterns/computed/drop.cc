// drop of a computed rule's source collection. Dropping the documents of
// a source behind the maintenance would leave every target's counts, sums
// and extremes standing for documents that no longer exist, so a source
// with maintained fields elsewhere (`aggregates`) is dropped only when it
// is empty: remold reads one _id first and refuses (InvalidOptions) when
// there is one, saying to delete the documents first (a deleteMany is
// maintained). Same-document fields live in the dropped documents
// themselves: with no aggregates the drop goes to the backend unchanged.
#include "patterns/computed/write.h"

namespace remold {

std::optional<Plan> ComputedDrop(const Command& command, const std::string& rule_name,
                                 const ComputedRule& rule) {
  if (rule.aggregates.empty()) return std::nullopt;
  BackendCommand find;
  bson_t* b = find.body.mut();
  AppendString(b, "find", rule.logical.collection);
  AppendDoc(b, "filter", Doc());
  Doc id_only;
  BSON_APPEND_INT32(id_only.mut(), "_id", 1);
  AppendDoc(b, "projection", id_only);
  BSON_APPEND_INT32(b, "limit", 1);
  BSON_APPEND_BOOL(b, "singleBatch", true);
  SealCommand(command, ArgumentTarget::kRead, rule.logical.db, b);

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
  std::string targets;
  for (const auto& aggregate : rule.aggregates)
    targets += (targets.empty() ? "" : ", ") + aggregate.target.full();
  const std::string refusal =
      "computed rule '" + rule_name + "' for " + rule.logical.full() + ": drop of a source that still has documents "
      "is not supported: the fields it maintains in " + targets +
      " would keep counting them. Delete the documents first (deleteMany({}) is maintained), "
      "then drop";
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
