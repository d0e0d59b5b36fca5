// Inserts on a followed collection: each document prepared (same-document
// fields set, copies of what it references, or refused; what that needs is
// read first when the rule asks), the accepted ones sent as one insert carrying
// the client's txnNumber; then each stored document recorded for the
// followers (a document the backend refused, or one a retry already
// stored, is recorded nowhere).
#include "patterns/source_writes/source_write.h"

namespace remold {

namespace {

struct Accepted {
  size_t index;  // in the client's documents
  Doc doc;       // as it is stored
};

// Prepares each document (refusals become write errors; an ordered insert
// stops at the first) and returns those accepted.
std::vector<Accepted> Prepare(SourceWrite* w, std::vector<Doc> documents, bool ordered, const Doc* pre_read) {
  std::vector<Accepted> accepted;
  for (size_t i = 0; i < documents.size(); ++i) {
    Doc out;
    if (auto error = w->rule().PrepareInsert(documents[i].get(), out, pre_read)) {
      w->FailStatement(i, *error);
      if (ordered) break;
      continue;
    }
    accepted.push_back({i, out.empty() ? std::move(documents[i]) : std::move(out)});
  }
  return accepted;
}

void QueueInsert(SourceWrite* w, std::shared_ptr<std::vector<Accepted>> accepted, bool ordered);

}  // namespace

std::optional<Plan> FollowedInsert(const Command& command, std::shared_ptr<const SourceRule> rule) {
  const bson_t* body = command.body.get();
  std::optional<bson_iter_t> documents = Find(body, "documents");
  if (!documents || !BSON_ITER_HOLDS_ARRAY(&*documents)) return std::nullopt;  // the backend explains
  bson_iter_t first;
  if (!bson_iter_recurse(&*documents, &first) || !bson_iter_next(&first)) return std::nullopt;
  const bool ordered = FindBool(body, "ordered").value_or(true);

  auto state = std::make_shared<SourceWrite>(rule, command);
  SourceWrite* w = state.get();
  std::vector<Doc> docs = ArrayDocuments(*documents);
  if (std::optional<BackendCommand> read = rule->InsertPreRead(docs, command)) {
    // What the documents need is read first; the insert follows its reply.
    auto pending = std::make_shared<std::vector<Doc>>(std::move(docs));
    w->queue().Push(std::move(*read), [w, pending, ordered](const Doc& reply) {
      if (!IsOkReply(reply)) {
        w->Abort(reply);  // nothing was inserted: the client gets the backend's error
        return;
      }
      auto accepted = std::make_shared<std::vector<Accepted>>(Prepare(w, std::move(*pending), ordered, &reply));
      if (!accepted->empty()) QueueInsert(w, accepted, ordered);
    });
  } else {
    auto accepted = std::make_shared<std::vector<Accepted>>(Prepare(w, std::move(docs), ordered, nullptr));
    if (accepted->empty()) {
      Plan plan;
      plan.immediate_reply = state->WriteReply(false);
      return plan;
    }
    QueueInsert(w, accepted, ordered);
  }
  w->ScheduleFollowUps();
  return w->Finish([state] { return ShapedReply{state->WriteReply(false), {}, {}, {}, state->warnings, {}}; });
}

namespace {

void QueueInsert(SourceWrite* w, std::shared_ptr<std::vector<Accepted>> accepted, bool ordered) {
  BackendCommand insert;
  bson_t* b = insert.body.mut();
  AppendString(b, "insert", w->source().collection);
  BSON_APPEND_BOOL(b, "ordered", ordered);
  Seal(insert, w->source(), w->client(), ArgumentTarget::kWrite);
  insert.sequence_id = "documents";
  for (const auto& a : *accepted) insert.sequence.push_back(a.doc);

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
}

}  // namespace
}  // namespace remold
