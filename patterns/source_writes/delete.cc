// Deletes from a followed collection: each document is removed by
// findAndModify, so the followers see exactly the documents removed (a
// document deleted concurrently by someone else is theirs to account for).
#include "patterns/source_writes/source_write.h"
#include "rewrite/cursor_reply.h"

#include <functional>

namespace remold {
namespace {

// Documents a delete-many removes per round: read their _ids, remove each.
constexpr int32_t kDeleteRound = 1000;

struct DeleteStatement {
  size_t index;
  Doc q;
  bool many;
  std::optional<Doc> collation;
  std::optional<Doc> hint;  // {v: hint}
};

void AppendOptions(bson_t* body, const DeleteStatement& s) {
  if (s.collation) AppendDoc(body, "collation", *s.collation);
  if (s.hint) AppendValue(body, "hint", *Find(s.hint->get(), "v"));
}

// Removes the document `query` matches; records what it removed. Calls
// `next` after a success (the statement goes on), not after a failure.
void QueueRemove(SourceWrite* w, const DeleteStatement& s, const Doc& query, ArgumentTarget target,
                 std::function<void()> next = nullptr) {
  BackendCommand remove = SourceFindAndModify(w->source());
  bson_t* b = remove.body.mut();
  AppendDoc(b, "query", query);
  BSON_APPEND_BOOL(b, "remove", true);
  AppendDoc(b, "fields", w->InputProjection());
  AppendOptions(b, s);
  Seal(remove, w->source(), w->client(), target);
  const size_t index = s.index;
  w->queue().Push(std::move(remove), [w, index, next](const Doc& reply) {
    if (!IsOkReply(reply)) {
      w->StatementFailed(index, reply);
      return;
    }
    w->NoteReply(reply);
    std::optional<bson_iter_t> found = Find(reply.get(), "value");
    if (found && BSON_ITER_HOLDS_DOCUMENT(&*found)) {  // else nothing matched (any more)
      w->n += 1;
      std::optional<Doc> value = FindDocument(reply.get(), "value");
      // One without an _id is none the backend stores (a misbehaving backend).
      if (!Find(reply.get(), "retriedStmtId") && Find(value->get(), "_id")) w->Record(value->get(), nullptr);
    }
    if (next) next();
  });
}

void QueueRound(SourceWrite* w, std::shared_ptr<DeleteStatement> s);

// Removes the round's documents one after the other; a failure ends the
// statement, as it ends a delete-many on the backend.
void QueueRemoveAt(SourceWrite* w, std::shared_ptr<DeleteStatement> s,
                   std::shared_ptr<std::vector<Doc>> ids, size_t k) {
  if (k == ids->size()) {
    if (!ids->empty()) QueueRound(w, s);  // more may match now
    return;
  }
  QueueRemove(w, *s, OneDocument(*Find((*ids)[k].get(), "_id"), s->q), ArgumentTarget::kPreparatoryWrite,
              [w, s, ids, k] { QueueRemoveAt(w, s, ids, k + 1); });
}

void QueueRound(SourceWrite* w, std::shared_ptr<DeleteStatement> s) {
  Doc options;
  AppendOptions(options.mut(), *s);
  BackendCommand find = FindIds(*w, s->q, kDeleteRound, options);
  w->queue().Push(std::move(find), [w, s](const Doc& reply) {
    if (!IsOkReply(reply)) {
      w->StatementFailed(s->index, reply);
      return;
    }
    auto ids = std::make_shared<std::vector<Doc>>(StoredDocuments(reply));
    QueueRemoveAt(w, s, ids, 0);
  });
}

}  // namespace

std::optional<Plan> FollowedDelete(const Command& command, std::shared_ptr<const SourceRule> rule) {
  const bson_t* body = command.body.get();
  std::optional<bson_iter_t> deletes = Find(body, "deletes");
  if (!deletes || !BSON_ITER_HOLDS_ARRAY(&*deletes)) return std::nullopt;
  const bool ordered = FindBool(body, "ordered").value_or(true);
  std::vector<Doc> statements = ArrayDocuments(*deletes);
  if (statements.empty()) return std::nullopt;

  // A single delete-one keeps the client's txnNumber: it is one findAndModify.
  const bool single = statements.size() == 1;
  auto state = std::make_shared<SourceWrite>(rule, command);
  SourceWrite* w = state.get();
  if (!w->has_followers()) return std::nullopt;  // nothing follows the documents removed
  if (IsRetryableWrite(command) &&
      (!single || FindInteger(statements[0].get(), "limit").value_or(0) == 0)) {
    Plan plan;
    plan.immediate_reply = RetryableWriteRefused(*rule, single ? "a delete of many documents"
                                                              : "a delete of several statements");
    return plan;
  }
  for (size_t i = 0; i < statements.size(); ++i) {
    auto s = std::make_shared<DeleteStatement>();
    s->index = i;
    s->q = FindDocument(statements[i].get(), "q").value_or(Doc());
    s->many = FindInteger(statements[i].get(), "limit").value_or(0) == 0;
    s->collation = FindDocument(statements[i].get(), "collation");
    if (auto hint = Find(statements[i].get(), "hint")) s->hint = Boxed(*hint);
    w->queue().AddPhase([w, s, ordered, single] {
      if (w->halted || (w->stopped && ordered)) return;
      w->stopped = false;
      if (s->many) QueueRound(w, s);
      else QueueRemove(w, *s, s->q, single ? ArgumentTarget::kWrite : ArgumentTarget::kPreparatoryWrite);
    });
  }
  w->ScheduleFollowUps();
  return w->Finish([state] { return ShapedReply{state->WriteReply(false), {}, {}, {}, state->warnings, {}}; });
}

}  // namespace remold
