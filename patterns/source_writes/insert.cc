// Inserts on a followed collection: each document prepared (same-document
// fields set, or refused), the accepted ones sent as one insert carrying
// the client's txnNumber; then each stored document recorded for the
// followers (a document the backend refused, or one a retry already
// stored, is recorded nowhere).
#include "patterns/source_writes/source_write.h"

namespace remold {

std::optional<Plan> FollowedInsert(const Command& command, std::shared_ptr<const SourceRule> rule) {
  const bson_t* body = command.body.get();
  std::optional<bson_iter_t> documents = Find(body, "documents");
  if (!documents || !BSON_ITER_HOLDS_ARRAY(&*documents)) return std::nullopt;  // the backend explains
  bson_iter_t first;
  if (!bson_iter_recurse(&*documents, &first) || !bson_iter_next(&first)) return std::nullopt;
  const bool ordered = FindBool(body, "ordered").value_or(true);

  auto state = std::make_shared<SourceWrite>(rule, command);
  struct Accepted {
    size_t index;
    Doc doc;
  };
  auto accepted = std::make_shared<std::vector<Accepted>>();
  size_t index = 0;
  for (Doc& doc : ArrayDocuments(*documents)) {
    const size_t i = index++;
    Doc out;
    if (auto error = rule->PrepareInsert(doc.get(), out)) {
      state->FailStatement(i, *error);
      if (ordered) break;
      continue;
    }
    accepted->push_back({i, out.empty() ? std::move(doc) : std::move(out)});
  }
  if (accepted->empty()) {
    Plan plan;
    plan.immediate_reply = state->WriteReply(false);
    return plan;
  }

  BackendCommand insert;
  bson_t* b = insert.body.mut();
  AppendString(b, "insert", rule->source().collection);
  BSON_APPEND_BOOL(b, "ordered", ordered);
  Seal(insert, rule->source(), command, ArgumentTarget::kWrite);
  insert.sequence_id = "documents";
  for (const auto& a : *accepted) insert.sequence.push_back(a.doc);

  SourceWrite* w = state.get();
  w->queue().Push(std::move(insert), [w, accepted, ordered](const Doc& reply) {
    if (!IsOkReply(reply)) {
      // Nothing was inserted: the client gets the backend's error as it is.
      w->Abort(reply);
      return;
    }
    w->NoteReply(reply);
    w->n = FindInteger(reply.get(), "n").value_or(0);
    std::vector<bool> failed(accepted->size(), false);
    std::optional<size_t> first_failure;
    if (auto errors = Find(reply.get(), "writeErrors"); errors && BSON_ITER_HOLDS_ARRAY(&*errors)) {
      for (const Doc& error : ArrayDocuments(*errors)) {
        size_t at = static_cast<size_t>(FindInteger(error.get(), "index").value_or(0));
        if (at >= accepted->size()) continue;
        failed[at] = true;
        if (!first_failure || at < *first_failure) first_failure = at;
        Doc mapped;
        BSON_APPEND_INT32(mapped.mut(), "index", static_cast<int32_t>((*accepted)[at].index));
        bson_iter_t it;
        bson_iter_init(&it, error.get());
        while (bson_iter_next(&it))
          if (std::string_view(bson_iter_key(&it)) != "index") AppendValue(mapped.mut(), bson_iter_key(&it), it);
        w->write_errors.push_back(std::move(mapped));
      }
    }
    if (ordered && first_failure) {
      // The backend stopped there: refusals of later documents were never reached.
      const size_t stop = (*accepted)[*first_failure].index;
      std::erase_if(w->write_errors, [stop](const Doc& e) {
        return FindInteger(e.get(), "index").value_or(0) > static_cast<int64_t>(stop);
      });
    }
    std::vector<bool> retried(accepted->size(), false);
    if (auto ids = Find(reply.get(), "retriedStmtIds"); ids && BSON_ITER_HOLDS_ARRAY(&*ids)) {
      ForEachChild(*ids, [&](std::string_view, const bson_iter_t& id) {
        int64_t at = bson_iter_as_int64(&id);
        if (at >= 0 && static_cast<size_t>(at) < retried.size()) retried[at] = true;
      });
    }
    for (size_t k = 0; k < accepted->size(); ++k) {
      if (failed[k] || (ordered && first_failure && k > *first_failure)) continue;
      if (!retried[k]) w->Record(nullptr, (*accepted)[k].doc.get());  // a retry was counted the first time
    }
  });
  w->ScheduleFollowUps();
  return w->Finish([state] { return ShapedReply{state->WriteReply(false), {}, {}, {}, state->warnings}; });
}

}  // namespace remold
