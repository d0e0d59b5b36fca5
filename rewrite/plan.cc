#include "rewrite/plan.h"

namespace remold {

bool IsOkReply(const Doc& reply) {
  auto ok = Find(reply.get(), "ok");
  return ok && bson_iter_as_double(&*ok) == 1.0;
}

Plan ImmediateReply(Doc reply) {
  Plan plan;
  plan.immediate_reply = std::move(reply);
  return plan;
}

Doc FoldedCommand(const BackendCommand& command) {
  if (command.sequence_id.empty()) return command.body;
  Doc shown;
  bson_iter_t it;
  bson_iter_init(&it, command.body.get());
  bool placed = false;
  while (bson_iter_next(&it)) {
    std::string_view key = bson_iter_key(&it);
    if (key == "$db" && !placed) {
      AppendArray(shown.mut(), command.sequence_id, command.sequence);
      placed = true;
    }
    AppendValue(shown.mut(), key, it);
  }
  if (!placed) AppendArray(shown.mut(), command.sequence_id, command.sequence);
  return shown;
}

BackendCommand KillCursorsCommand(const ShapedReply& shaped) {
  BackendCommand kill;
  AppendString(kill.body.mut(), "killCursors", shaped.kill_collection);
  bson_t ids;
  BSON_APPEND_ARRAY_BEGIN(kill.body.mut(), "cursors", &ids);
  for (size_t i = 0; i < shaped.cursors_to_kill.size(); ++i)
    BSON_APPEND_INT64(&ids, std::to_string(i).c_str(), shaped.cursors_to_kill[i]);
  bson_append_array_end(kill.body.mut(), &ids);
  AppendString(kill.body.mut(), "$db", shaped.kill_db);
  return kill;
}

}  // namespace remold
