// Updates on a followed collection. A statement that can change a watched
// field (one a follower reads, or a same-document field's input) runs as
// findAndModify per document, returning the document as it was; its
// watched fields afterwards follow from the update for $set/$unset/$inc,
// and are read back otherwise. Statements that touch nothing watched, and
// a write with none of those, go to the backend unchanged.
#include <algorithm>
#include <functional>

#include "patterns/source_writes/source_write.h"
#include "patterns/source_writes/update_apply.h"
#include "rewrite/cursor_reply.h"

namespace remold {
namespace {

// An update-many that changes inputs visits each document; past this many
// it is refused before anything changes.
constexpr int32_t kMaxUpdateMany = 100'000;

struct UpdateStatement {
  size_t index = 0;
  Doc q;
  ClientUpdate update;  // as sent to the backend (same-document fields handled)
  bool multi = false;
  bool upsert = false;
  Doc options;  // arrayFilters, collation, hint: appended as they are
  // The write's counts before an update-many's first document: a statement
  // that fails counts nothing, as mongod's reply does (the documents it
  // changed before the failure stay changed, and their follow-ups run).
  int64_t n_before = 0;
  int64_t n_modified_before = 0;
};

bool NeedsWork(const SourceRule& rule, const std::vector<std::string>& watched,
               const ClientUpdate& update) {
  if (UpdateTouches(update, watched)) return true;
  std::vector<std::string> document_fields = rule.DocumentFieldsWatched();
  return !document_fields.empty() && UpdateTouches(update, document_fields);
}

Doc StatementOptions(const bson_t* statement) {
  Doc options;
  for (const char* key : {"arrayFilters", "collation", "hint"})
    if (auto v = Find(statement, key)) AppendValue(options.mut(), key, *v);
  return options;
}

void AppendUpdate(bson_t* body, const char* key, const ClientUpdate& update) {
  if (update.pipeline) {
    bson_t array;
    bson_append_array_begin(body, key, -1, &array);
    bson_concat(&array, update.u.get());
    bson_append_array_end(body, &array);
  } else {
    AppendDoc(body, key, update.u);
  }
}

// After a document changed (`before`), or an upsert inserted one (no
// `before`; `query` is the upsert's): its inputs as the update left them,
// worked out or read back; then recorded for the followers and repair. An
// insert whose inputs follow from its query and update is counted even if
// another client deletes the document before it could be read.
void RecordChange(SourceWrite* w, std::optional<Doc> before, const ClientUpdate& update,
                  const bson_iter_t& id, const Doc& query) {
  w->Repair(id);
  if (!w->has_followers()) return;
  std::optional<Doc> after = before ? FieldsAfterUpdate(before->get(), update, w->inputs())
                                    : FieldsOfUpsert(query.get(), update, w->inputs(), id);
  if (after) {
    if (!Find(after->get(), "_id")) AppendValue(after->mut(), "_id", id);  // for the latest check
    w->Record(before ? before->get() : nullptr, after->get());
    return;
  }
  // Read back: exact unless another writer changes the same document's
  // inputs in between (docs/patterns/computed.md, "Consistency").
  BackendCommand read;
  bson_t* b = read.body.mut();
  AppendString(b, "find", w->source().collection);
  Doc filter;
  AppendValue(filter.mut(), "_id", id);
  AppendDoc(b, "filter", filter);
  AppendDoc(b, "projection", w->InputProjection());
  BSON_APPEND_INT32(b, "limit", 1);
  BSON_APPEND_BOOL(b, "singleBatch", true);
  Seal(read, w->source(), w->client(), ArgumentTarget::kRead);
  w->queue().Push(std::move(read), [w, before](const Doc& reply) {
    std::optional<Doc> after;
    if (std::vector<Doc> docs = FirstBatch(reply); !docs.empty()) after = docs.front();
    w->Record(before ? before->get() : nullptr, after ? after->get() : nullptr);
  });
}

// The document a findAndModify reply returns, or nullopt. One without an
// _id is none the backend stores (a misbehaving backend): nothing follows it.
std::optional<Doc> ValueOf(const Doc& reply) {
  auto v = Find(reply.get(), "value");
  if (!v || !BSON_ITER_HOLDS_DOCUMENT(&*v)) return std::nullopt;
  std::optional<Doc> value = FindDocument(reply.get(), "value");
  if (!Find(value->get(), "_id")) return std::nullopt;
  return value;
}

// The document an upsert inserted, for a backend whose findAndModify reply
// does not name it (lastErrorObject.upserted): the _id the query or the
// replacement fixes, or else the one document `query` matches now. Two or
// more: it cannot be told, and reconciliation will.
void QueueFindInserted(SourceWrite* w, const Doc& query, const ClientUpdate& update,
                       std::function<void(const bson_iter_t& id)> found) {
  if (std::optional<Doc> id = UpsertIdOf(query.get(), update)) {
    found(*Find(id->get(), "_id"));
    return;
  }
  BackendCommand find = FindIds(*w, query, 2, Doc());
  w->queue().Push(std::move(find), [w, found](const Doc& reply) {
    std::vector<Doc> docs = StoredDocuments(reply);
    if (docs.size() == 1) {
      found(*Find(docs.front().get(), "_id"));
      return;
    }
    w->warnings.push_back("an upsert into " + w->source().full() +
                          " inserted a document the backend did not name, and its filter now "
                          "matches " + std::to_string(docs.size()) +
                          "; what follows it is left to `remold reconcile`");
  });
}

// Runs `query` through findAndModify with the statement's update, and
// records what it changed; `next` follows a success (not a failure).
void QueueModify(SourceWrite* w, std::shared_ptr<UpdateStatement> s, const Doc& query, bool upsert,
                 ArgumentTarget target, std::function<void()> next = nullptr) {
  BackendCommand modify = SourceFindAndModify(w->source());
  bson_t* b = modify.body.mut();
  AppendDoc(b, "query", query);
  AppendUpdate(b, "update", s->update);
  BSON_APPEND_BOOL(b, "new", false);
  if (upsert) BSON_APPEND_BOOL(b, "upsert", true);
  bson_concat(b, s->options.get());
  AppendDoc(b, "fields", w->InputProjection());
  Seal(modify, w->source(), w->client(), target);
  w->queue().Push(std::move(modify), [w, s, next, upsert, query](const Doc& reply) {
    if (!IsOkReply(reply)) {
      if (s->multi) {
        w->n = s->n_before;
        w->n_modified = s->n_modified_before;
      }
      w->StatementFailed(s->index, reply);
      return;
    }
    w->NoteReply(reply);
    if (next) next();
    const bool retried = Find(reply.get(), "retriedStmtId").has_value();
    std::optional<Doc> before = ValueOf(reply);
    std::optional<Doc> last_error = FindDocument(reply.get(), "lastErrorObject");
    std::optional<bson_iter_t> upserted = last_error ? Find(last_error->get(), "upserted") : std::nullopt;
    auto inserted = [w, s, retried, query](const bson_iter_t& id) {
      w->n += 1;
      Doc entry;
      BSON_APPEND_INT32(entry.mut(), "index", static_cast<int32_t>(s->index));
      AppendValue(entry.mut(), "_id", id);
      w->upserted.push_back(std::move(entry));
      if (!retried) RecordChange(w, std::nullopt, s->update, id, query);
    };
    if (before) {
      w->n += 1;
      w->n_modified += 1;  // findAndModify cannot say whether it was a no-op (docs/patterns/computed.md)
      if (!retried) RecordChange(w, before, s->update, *Find(before->get(), "_id"), query);
    } else if (upserted) {
      inserted(*upserted);
    } else if (upsert) {
      // An upsert that matched nothing inserted a document.
      QueueFindInserted(w, query, s->update, inserted);
    }
  });
}

// Updates the documents one after the other; a failure ends the
// statement, as it ends an update-many on the backend.
void QueueModifyAt(SourceWrite* w, std::shared_ptr<UpdateStatement> s,
                   std::shared_ptr<std::vector<Doc>> ids, size_t k) {
  if (k == ids->size()) return;
  QueueModify(w, s, OneDocument(*Find((*ids)[k].get(), "_id"), s->q), false,
              ArgumentTarget::kPreparatoryWrite, [w, s, ids, k] { QueueModifyAt(w, s, ids, k + 1); });
}

void QueueUpdateMany(SourceWrite* w, std::shared_ptr<UpdateStatement> s) {
  Doc options;
  for (const char* key : {"collation", "hint"})
    if (auto v = Find(s->options.get(), key)) AppendValue(options.mut(), key, *v);
  BackendCommand find = FindIds(*w, s->q, kMaxUpdateMany + 1, options);
  w->queue().Push(std::move(find), [w, s](const Doc& reply) {
    if (!IsOkReply(reply)) {
      w->StatementFailed(s->index, reply);
      return;
    }
    s->n_before = w->n;
    s->n_modified_before = w->n_modified;
    std::vector<Doc> ids = StoredDocuments(reply);
    if (ids.size() > static_cast<size_t>(kMaxUpdateMany)) {
      w->FailStatement(s->index, Refusal{error_codes::kInvalidOptions,
                                         "an update of many documents that changes fields "
                                         "other documents follow may match at most " +
                                             std::to_string(kMaxUpdateMany) +
                                             "; nothing was changed: narrow the filter"});
      w->stopped = true;
      return;
    }
    if (ids.empty() && s->upsert) {
      QueueModify(w, s, s->q, true, ArgumentTarget::kPreparatoryWrite);
      return;
    }
    QueueModifyAt(w, s, std::make_shared<std::vector<Doc>>(std::move(ids)), 0);
  });
}

// A statement that needs nothing of remold, as its own update command.
void QueuePlain(SourceWrite* w, const Doc& statement, size_t index, ArgumentTarget target) {
  BackendCommand update;
  AppendString(update.body.mut(), "update", w->source().collection);
  BSON_APPEND_BOOL(update.body.mut(), "ordered", true);
  Seal(update, w->source(), w->client(), target);
  update.sequence_id = "updates";
  update.sequence.push_back(statement);
  w->queue().Push(std::move(update), [w, index](const Doc& reply) {
    if (!IsOkReply(reply)) {
      w->StatementFailed(index, reply);
      return;
    }
    w->NoteReply(reply);
    w->n += FindInteger(reply.get(), "n").value_or(0);
    w->n_modified += FindInteger(reply.get(), "nModified").value_or(0);
    if (auto up = Find(reply.get(), "upserted"); up && BSON_ITER_HOLDS_ARRAY(&*up)) {
      for (const Doc& entry : ArrayDocuments(*up)) {
        Doc mapped;
        BSON_APPEND_INT32(mapped.mut(), "index", static_cast<int32_t>(index));
        AppendValue(mapped.mut(), "_id", *Find(entry.get(), "_id"));
        w->upserted.push_back(std::move(mapped));
      }
    }
    if (auto errors = Find(reply.get(), "writeErrors"); errors && BSON_ITER_HOLDS_ARRAY(&*errors)) {
      for (const Doc& error : ArrayDocuments(*errors)) {
        w->FailStatement(index, error);
        w->stopped = true;
      }
    }
  });
}

}  // namespace

std::optional<Plan> FollowedUpdate(const Command& command, std::shared_ptr<const SourceRule> rule) {
  const bson_t* body = command.body.get();
  std::optional<bson_iter_t> updates = Find(body, "updates");
  if (!updates || !BSON_ITER_HOLDS_ARRAY(&*updates)) return std::nullopt;
  const bool ordered = FindBool(body, "ordered").value_or(true);
  std::vector<Doc> statements = ArrayDocuments(*updates);

  auto state = std::make_shared<SourceWrite>(rule, command);
  SourceWrite* w = state.get();
  bool any_work = false;
  std::vector<bool> needs(statements.size(), false);
  for (size_t i = 0; i < statements.size(); ++i) {
    auto u = Find(statements[i].get(), "u");
    if (!u) return std::nullopt;  // malformed: the backend explains
    // An upsert may insert: the new document is counted and gets its
    // same-document fields whatever its update touches.
    needs[i] = NeedsWork(*rule, w->inputs(), ClientUpdateOf(*u)) ||
               FindBool(statements[i].get(), "upsert").value_or(false);
    any_work = any_work || needs[i];
  }
  if (!any_work) return std::nullopt;

  const bool single = statements.size() == 1;
  if (IsRetryableWrite(command) &&
      (!single || FindBool(statements[0].get(), "multi").value_or(false))) {
    Plan plan;
    plan.immediate_reply = RetryableWriteRefused(
        *rule, single ? "an update of many documents" : "an update of several statements");
    return plan;
  }
  const ArgumentTarget own = single ? ArgumentTarget::kWrite : ArgumentTarget::kPreparatoryWrite;
  std::vector<std::optional<Refusal>> refusals;
  for (size_t i = 0; i < statements.size(); ++i) {
    const Doc& statement = statements[i];
    auto s = std::make_shared<UpdateStatement>();
    s->index = i;
    s->q = FindDocument(statement.get(), "q").value_or(Doc());
    s->multi = FindBool(statement.get(), "multi").value_or(false);
    s->upsert = FindBool(statement.get(), "upsert").value_or(false);
    s->options = StatementOptions(statement.get());
    const bool work = needs[i];
    std::optional<Refusal> refusal;
    if (work) refusal = rule->PrepareUpdate(ClientUpdateOf(*Find(statement.get(), "u")), s->update);
    refusals.push_back(refusal);
    w->queue().AddPhase([w, s, statement, work, refusal, ordered, own] {
      if (w->halted || (w->stopped && ordered)) return;
      w->stopped = false;
      if (refusal) {
        w->FailStatement(s->index, *refusal);
        w->stopped = true;
      } else if (!work) {
        QueuePlain(w, statement, s->index, own);
      } else if (s->multi) {
        QueueUpdateMany(w, s);
      } else {
        QueueModify(w, s, s->q, s->upsert, own);
      }
    });
  }
  const bool all_refused = std::all_of(refusals.begin(), refusals.end(), [](const auto& r) { return r.has_value(); });
  if ((ordered && refusals.front()) || all_refused) {
    // Nothing would reach the backend: remold answers by itself.
    for (size_t i = 0; i < refusals.size(); ++i) {
      if (!refusals[i]) continue;
      w->FailStatement(i, *refusals[i]);
      if (ordered) break;
    }
    Plan plan;
    plan.immediate_reply = w->WriteReply(true);
    return plan;
  }
  w->ScheduleFollowUps();
  return w->Finish([state] { return ShapedReply{state->WriteReply(true), {}, {}, {}, state->warnings, {}}; });
}

// findAndModify: run with new: false (the document as it was), so the
// values it removes are known; a client asking for the new document gets
// it read back after remold's repairs.
namespace {

// What the client's findAndModify did, as its follow-ups learn it.
struct FindAndModifyOutcome {
  std::optional<Doc> failure;  // the backend's ok: 0 reply
  std::optional<Doc> last_error;
  std::optional<Doc> before;
  std::optional<Doc> id;     // {v: _id} of the document changed or inserted
  std::optional<Doc> after;  // read back for new: true
};

// Why `fields` cannot be applied to the document as it was (remold returns
// it from its own read, so only a plain projection can be), or nothing.
std::optional<std::string> BeforeImageProjectionProblem(const SourceRule& rule,
                                                        const Doc& fields) {
  bson_iter_t it;
  bson_iter_init(&it, fields.get());
  while (bson_iter_next(&it)) {
    if (std::string_view(bson_iter_key(&it)).find('.') != std::string_view::npos ||
        BSON_ITER_HOLDS_DOCUMENT(&it))
      return "findAndModify on " + rule.source().full() + " (" + rule.Kind() +
             ") supports only top-level field projections when returning the "
             "document before the change";
  }
  return std::nullopt;
}

// The client's findAndModify as remold sends it: always returning the
// document as it was (new: false), with the update remold prepared.
BackendCommand SourceFindAndModifyOf(const Command& command, const Namespace& source, bool remove,
                                     const ClientUpdate& update) {
  BackendCommand modify = SourceFindAndModify(source);
  bson_t* b = modify.body.mut();
  bson_iter_t it;
  bson_iter_init(&it, command.body.get());
  bson_iter_next(&it);  // the command name
  while (bson_iter_next(&it)) {
    std::string_view key = bson_iter_key(&it);
    if (key == "new" || key == "fields" || key == "update" || key == "$db") continue;  // `let`: Seal
    if (key == "query" || key == "sort" || key == "remove" || key == "upsert" ||
        key == "arrayFilters" || key == "collation" || key == "hint")
      AppendValue(b, key, it);
  }
  if (!remove) AppendUpdate(b, "update", update);
  BSON_APPEND_BOOL(b, "new", false);
  Seal(modify, source, command, ArgumentTarget::kWrite);
  return modify;
}

// Records the change the client's findAndModify made (its reply), for the
// maintenance that follows.
void RecordFindAndModify(SourceWrite* w, const std::shared_ptr<FindAndModifyOutcome>& outcome,
                         const Doc& reply, bool remove,
                         const std::shared_ptr<ClientUpdate>& update, bool upsert,
                         const std::shared_ptr<Doc>& query) {
  if (!IsOkReply(reply)) {
    outcome->failure = reply;
    w->stopped = true;
    return;
  }
  w->NoteReply(reply);
  outcome->last_error = FindDocument(reply.get(), "lastErrorObject");
  outcome->before = ValueOf(reply);
  const bool retried = Find(reply.get(), "retriedStmtId").has_value();
  std::optional<bson_iter_t> upserted =
      outcome->last_error ? Find(outcome->last_error->get(), "upserted") : std::nullopt;
  if (outcome->before) {
    outcome->id = Boxed(*Find(outcome->before->get(), "_id"));
    if (retried) return;
    if (remove) w->Record(ProjectFields(outcome->before->get(), w->inputs()).get(), nullptr);
    else RecordChange(w, ProjectFields(outcome->before->get(), w->inputs()), *update,
                      *Find(outcome->before->get(), "_id"), *query);
  } else if (upserted) {
    outcome->id = Boxed(*upserted);
    if (!retried) RecordChange(w, std::nullopt, *update, *upserted, *query);
  } else if (upsert) {
    // An upsert that matched nothing inserted a document.
    QueueFindInserted(w, *query, *update, [w, outcome, update, query, retried](const bson_iter_t& id) {
      outcome->id = Boxed(id);
      Doc last_error;
      BSON_APPEND_INT32(last_error.mut(), "n", 1);
      BSON_APPEND_BOOL(last_error.mut(), "updatedExisting", false);
      AppendValue(last_error.mut(), "upserted", id);
      outcome->last_error = std::move(last_error);
      if (!retried) RecordChange(w, std::nullopt, *update, id, *query);
    });
  }
}

// new: true: the document is read back once its same-document fields are set.
void QueueReadBack(SourceWrite* w, const std::shared_ptr<FindAndModifyOutcome>& outcome,
                   const std::optional<Doc>& fields) {
  if (!outcome->id) return;
  BackendCommand read;
  bson_t* rb = read.body.mut();
  AppendString(rb, "find", w->source().collection);
  Doc filter;
  AppendValue(filter.mut(), "_id", *Find(outcome->id->get(), "v"));
  AppendDoc(rb, "filter", filter);
  if (fields) AppendDoc(rb, "projection", *fields);
  BSON_APPEND_INT32(rb, "limit", 1);
  BSON_APPEND_BOOL(rb, "singleBatch", true);
  Seal(read, w->source(), w->client(), ArgumentTarget::kRead);
  w->queue().Push(std::move(read), [outcome](const Doc& reply) {
    if (std::vector<Doc> docs = FirstBatch(reply); !docs.empty()) outcome->after = docs.front();
  });
}

// A plain projection (top-level fields, inclusion or exclusion) of `value`.
Doc ProjectPlainly(const Doc& value, const Doc& fields) {
  bool inclusion = false;
  bson_iter_t f;
  bson_iter_init(&f, fields.get());
  while (bson_iter_next(&f))
    if (std::string_view(bson_iter_key(&f)) != "_id" && bson_iter_as_bool(&f)) inclusion = true;
  Doc projected;
  bson_iter_t v;
  bson_iter_init(&v, value.get());
  while (bson_iter_next(&v)) {
    std::string_view key = bson_iter_key(&v);
    std::optional<bson_iter_t> spec = Find(fields.get(), key);
    bool keep = key == "_id" ? (!spec || bson_iter_as_bool(&*spec))
                             : (inclusion ? spec && bson_iter_as_bool(&*spec)
                                          : !spec || bson_iter_as_bool(&*spec));
    if (keep) AppendValue(projected.mut(), key, v);
  }
  return projected;
}

// The client's findAndModify reply.
ShapedReply FindAndModifyReply(const SourceWrite& state, const FindAndModifyOutcome& outcome,
                               bool returns_after, const std::optional<Doc>& fields) {
  ShapedReply shaped;
  shaped.warnings = state.warnings;
  if (outcome.failure) {
    shaped.reply = *outcome.failure;
    return shaped;
  }
  bson_t* r = shaped.reply.mut();
  if (outcome.last_error) AppendDoc(r, "lastErrorObject", *outcome.last_error);
  std::optional<Doc> value = returns_after ? outcome.after : outcome.before;
  if (value && fields && !returns_after) value = ProjectPlainly(*value, *fields);
  if (value) AppendDoc(r, "value", *value);
  else BSON_APPEND_NULL(r, "value");
  if (state.write_concern_error) AppendDoc(r, "writeConcernError", *state.write_concern_error);
  if (state.cluster_time) bson_concat(r, state.cluster_time->get());
  BSON_APPEND_DOUBLE(r, "ok", 1.0);
  return shaped;
}

}  // namespace

std::optional<Plan> FollowedFindAndModify(const Command& command, std::shared_ptr<const SourceRule> rule) {
  const bson_t* body = command.body.get();
  const bool remove = FindBool(body, "remove").value_or(false);
  std::optional<bson_iter_t> u = Find(body, "update");
  auto state = std::make_shared<SourceWrite>(rule, command);
  SourceWrite* w = state.get();
  ClientUpdate update;
  if (remove) {
    if (!w->has_followers()) return std::nullopt;
  } else {
    if (!u) return std::nullopt;
    if (!NeedsWork(*rule, w->inputs(), ClientUpdateOf(*u)) && !FindBool(body, "upsert").value_or(false))
      return std::nullopt;  // an upsert may insert: see FollowedUpdate
    if (auto refusal = rule->PrepareUpdate(ClientUpdateOf(*u), update))
      return ImmediateReply(ErrorReply(*refusal));
  }
  const bool returns_after = FindBool(body, "new").value_or(false) && !remove;
  std::optional<Doc> fields = FindDocument(body, "fields");
  if (fields && !FindBool(body, "new").value_or(false)) {
    if (auto problem = BeforeImageProjectionProblem(*rule, *fields))
      return ImmediateReply(ErrorReply(error_codes::kInvalidOptions, *problem));
  }

  auto outcome = std::make_shared<FindAndModifyOutcome>();
  auto shared_update = std::make_shared<ClientUpdate>(std::move(update));
  const bool upsert = FindBool(body, "upsert").value_or(false);
  auto query = std::make_shared<Doc>(FindDocument(body, "query").value_or(Doc()));
  w->queue().Push(SourceFindAndModifyOf(command, rule->source(), remove, *shared_update),
                  [w, outcome, remove, shared_update, upsert, query](const Doc& reply) {
                    RecordFindAndModify(w, outcome, reply, remove, shared_update, upsert, query);
                  });
  w->ScheduleFollowUps();
  if (returns_after) w->queue().AddPhase([w, outcome, fields] { QueueReadBack(w, outcome, fields); });
  return w->Finish([state, outcome, returns_after, fields] {
    return FindAndModifyReply(*state, *outcome, returns_after, fields);
  });
}

}  // namespace remold
