#include "rewrite/refused_statements.h"

#include <algorithm>
#include <utility>

namespace remold {
namespace {

Doc WriteError(size_t index, const Refusal& refusal) {
  Doc error;
  BSON_APPEND_INT32(error.mut(), "index", static_cast<int32_t>(index));
  BSON_APPEND_INT32(error.mut(), "code", refusal.code.value);
  AppendString(error.mut(), "codeName", refusal.code.name);
  AppendString(error.mut(), "errmsg", refusal.message);
  return error;
}

// `entries` ({index, ...}) with each index i replaced by kept[i].
std::vector<Doc> Reindexed(const bson_iter_t& entries, const std::vector<size_t>& kept) {
  std::vector<Doc> out;
  for (const Doc& entry : ArrayDocuments(entries)) {
    Doc moved;
    bson_iter_t it;
    bson_iter_init(&it, entry.get());
    while (bson_iter_next(&it)) {
      if (std::string_view(bson_iter_key(&it)) == "index" && BSON_ITER_HOLDS_NUMBER(&it)) {
        const auto i = static_cast<size_t>(bson_iter_as_int64(&it));
        BSON_APPEND_INT32(moved.mut(), "index", static_cast<int32_t>(i < kept.size() ? kept[i] : i));
      } else {
        AppendValue(moved.mut(), bson_iter_key(&it), it);
      }
    }
    out.push_back(std::move(moved));
  }
  return out;
}

int64_t IndexOf(const Doc& entry) { return FindInteger(entry.get(), "index").value_or(0); }

// The reply to the statements that ran, as the reply to the client's:
// indexes mapped back, the refusals added where mongod would report them.
Doc ClientReply(const Doc& reply, const std::vector<size_t>& kept, const std::vector<StatementRefusal>& refused,
                bool ordered) {
  if (!IsOkReply(reply)) return reply;  // the command failed: it says so itself
  std::vector<Doc> errors, upserted;
  if (auto e = Find(reply.get(), "writeErrors"); e && BSON_ITER_HOLDS_ARRAY(&*e)) errors = Reindexed(*e, kept);
  if (auto u = Find(reply.get(), "upserted"); u && BSON_ITER_HOLDS_ARRAY(&*u)) upserted = Reindexed(*u, kept);
  // Ordered, a statement that failed before the refused one stopped the
  // command there: the refused statement was never reached.
  if (!ordered || errors.empty())
    for (const StatementRefusal& r : refused) errors.push_back(WriteError(r.index, r.refusal));
  std::stable_sort(errors.begin(), errors.end(), [](const Doc& a, const Doc& b) { return IndexOf(a) < IndexOf(b); });
  Doc out;
  bson_iter_t it;
  bson_iter_init(&it, reply.get());
  while (bson_iter_next(&it)) {
    const std::string_view key = bson_iter_key(&it);
    if (key == "writeErrors" || key == "upserted") continue;
    if (key == "ok") {
      if (!upserted.empty()) AppendArray(out.mut(), "upserted", upserted);
      if (!errors.empty()) AppendArray(out.mut(), "writeErrors", errors);
    }
    AppendValue(out.mut(), key, it);
  }
  return out;
}

// `planned`, or a plan that sends `command` as it is and relays the reply.
Plan AsItIsUnlessPlanned(const Command& command, std::optional<Plan> planned) {
  if (planned) return std::move(*planned);
  Plan plan;
  BackendCommand forwarded;
  forwarded.body = command.body;
  plan.commands.push_back(std::move(forwarded));
  plan.shape = [](std::span<const Doc> replies) { return ShapedReply{replies.front(), {}, {}, {}, {}, {}}; };
  return plan;
}

}  // namespace

Plan WithRefusedStatements(const Command& client, std::string_view statements_key,
                           std::vector<StatementRefusal> refused,
                           const std::function<std::optional<Plan>(const Command& rest)>& plan_rest) {
  if (refused.empty()) return AsItIsUnlessPlanned(client, plan_rest(client));
  std::stable_sort(refused.begin(), refused.end(),
                   [](const StatementRefusal& a, const StatementRefusal& b) { return a.index < b.index; });
  std::optional<bson_iter_t> array = Find(client.body.get(), statements_key);
  if (InTransaction(client) || !array || !BSON_ITER_HOLDS_ARRAY(&*array))
    return ImmediateReply(ErrorReply(refused.front().refusal));
  const std::vector<Doc> statements = ArrayDocuments(*array);
  const bool ordered = FindBool(client.body.get(), "ordered").value_or(true);
  if (ordered) refused.resize(1);
  const size_t end = ordered ? refused.front().index : statements.size();
  std::vector<size_t> kept;
  std::vector<Doc> running;
  for (size_t i = 0, r = 0; i < end; ++i) {
    while (r < refused.size() && refused[r].index < i) ++r;
    if (r < refused.size() && refused[r].index == i) continue;
    kept.push_back(i);
    running.push_back(statements[i]);
  }
  if (running.empty()) {
    Doc reply;
    BSON_APPEND_INT32(reply.mut(), "n", 0);
    if (client.name == "update") BSON_APPEND_INT32(reply.mut(), "nModified", 0);
    BSON_APPEND_DOUBLE(reply.mut(), "ok", 1.0);
    return ImmediateReply(ClientReply(reply, kept, refused, ordered));
  }
  Command rest{client.db, client.name, Doc()};
  bson_iter_t it;
  bson_iter_init(&it, client.body.get());
  while (bson_iter_next(&it)) {
    if (std::string_view(bson_iter_key(&it)) == statements_key) AppendArray(rest.body.mut(), statements_key, running);
    else AppendValue(rest.body.mut(), bson_iter_key(&it), it);
  }
  Plan plan = AsItIsUnlessPlanned(rest, plan_rest(rest));
  if (plan.immediate_reply) {
    plan.immediate_reply = ClientReply(*plan.immediate_reply, kept, refused, ordered);
    return plan;
  }
  plan.shape = [shape = std::move(plan.shape), kept, refused, ordered](std::span<const Doc> replies) {
    ShapedReply out = shape(replies);
    out.reply = ClientReply(out.reply, kept, refused, ordered);
    return out;
  };
  return plan;
}

}  // namespace remold
