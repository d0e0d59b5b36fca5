#include "patterns/computed/rewrite.h"

#include <algorithm>

#include "patterns/computed/fields.h"
#include "patterns/computed/write.h"

namespace remold {

Doc ComputedWrite::Box(const bson_iter_t& value) {
  Doc box;
  AppendValue(box.mut(), "v", value);
  return box;
}

ComputedWrite::ComputedWrite(const ComputedRule& rule, const Command& client)
    : rule_(rule), client_(client), queue_(std::make_shared<CommandQueue>()) {
  for (const auto& aggregate : rule_.aggregates)
    for (const auto& f : aggregate.inputs)
      if (std::find(inputs_.begin(), inputs_.end(), f) == inputs_.end()) inputs_.push_back(f);
  maintenance_.reserve(rule_.aggregates.size());  // phases hold pointers into it
  for (const auto& aggregate : rule_.aggregates)
    maintenance_.emplace_back(aggregate, rule_.logical, client_, &warnings,
                              [this](const Doc& error) { Abort(error); });
}

void ComputedWrite::Abort(const Doc& reply) {
  failure = reply;
  halted = stopped = true;
  queue_->Clear();
}

void ComputedWrite::StatementFailed(size_t index, const Doc& reply) {
  stopped = true;
  if (InTransaction(client_)) {
    Abort(reply);
  } else if (Find(reply.get(), "errorLabels")) {
    failure = reply;  // what was done before still gets its follow-ups
    halted = true;
  } else {
    FailStatement(index, reply);
  }
}

bool IsRetryableWrite(const Command& client) {
  return Find(client.body.get(), "txnNumber").has_value() && !InTransaction(client);
}

Doc RetryableWriteRefused(const ComputedRule& rule, const std::string& what) {
  return ErrorReply(error_codes::kInvalidOptions,
                    "remold: " + what + " on " + rule.logical.full() +
                        " (a computed rule) cannot stay a retryable write: remold runs it as one "
                        "command per document, which the backend cannot deduplicate on a retry. "
                        "Send the statements one per command, or use a transaction");
}

Doc OneDocument(const bson_iter_t& id, const Doc& q) {
  Doc query;
  AppendValue(query.mut(), "_id", id);
  if (!q.empty()) AppendArray(query.mut(), "$and", {q});
  return query;
}

Doc ComputedWrite::InputProjection() const {
  Doc projection;
  BSON_APPEND_INT32(projection.mut(), "_id", 1);
  for (const auto& f : inputs_)
    if (f != "_id") BSON_APPEND_INT32(projection.mut(), f.c_str(), 1);
  return projection;
}

void ComputedWrite::Record(const bson_t* before, const bson_t* after) {
  for (auto& m : maintenance_) m.Record(before, after);
}

void ComputedWrite::ScheduleFollowUps() {
  queue_->AddPhase([this] {
    ScheduleComputedRepair(*queue_, rule_, client_, std::move(repair_ids_), &warnings,
                           [this](const Doc& error) { Abort(error); });
  });
  for (auto& m : maintenance_) m.Schedule(*queue_);
}

Plan ComputedWrite::Finish(std::function<ShapedReply()> shape) {
  Plan plan;
  queue_->Install(plan);
  plan.shape = [this, shape = std::move(shape)](std::span<const Doc> replies) {
    ShapedReply shaped = failure ? ShapedReply{*failure, {}, {}, {}, warnings} : shape();
    // The cluster time after the last follow-up, so a causally consistent
    // read that follows sees the maintained values too.
    for (auto r = replies.rbegin(); r != replies.rend(); ++r) {
      if (!Find(r->get(), "$clusterTime")) continue;
      Doc with_time;
      bson_copy_to_excluding_noinit(shaped.reply.get(), with_time.mut(), "$clusterTime",
                                    "operationTime", nullptr);
      for (const char* key : {"$clusterTime", "operationTime"})
        if (auto v = Find(r->get(), key)) AppendValue(with_time.mut(), key, *v);
      shaped.reply = std::move(with_time);
      break;
    }
    return shaped;
  };
  return plan;
}

void ComputedWrite::NoteReply(const Doc& reply) {
  if (auto wce = FindDocument(reply.get(), "writeConcernError")) write_concern_error = wce;
  Doc times;
  for (const char* key : {"$clusterTime", "operationTime"})
    if (auto v = Find(reply.get(), key)) AppendValue(times.mut(), key, *v);
  if (!times.empty()) cluster_time = std::move(times);
}

void ComputedWrite::FailStatement(size_t index, int code, const std::string& code_name,
                                  const std::string& errmsg) {
  Doc error;
  BSON_APPEND_INT32(error.mut(), "index", static_cast<int32_t>(index));
  BSON_APPEND_INT32(error.mut(), "code", code);
  if (!code_name.empty()) AppendString(error.mut(), "codeName", code_name);
  AppendString(error.mut(), "errmsg", errmsg);
  write_errors.push_back(std::move(error));
}

void ComputedWrite::FailStatement(size_t index, const Doc& reply) {
  FailStatement(index, static_cast<int>(FindInteger(reply.get(), "code").value_or(8)),
                FindString(reply.get(), "codeName").value_or(""),
                FindString(reply.get(), "errmsg").value_or("the backend refused the write"));
}

Doc ComputedWrite::WriteReply(bool with_modified) const {
  Doc reply;
  bson_t* r = reply.mut();
  BSON_APPEND_INT32(r, "n", static_cast<int32_t>(n));
  if (with_modified) BSON_APPEND_INT32(r, "nModified", static_cast<int32_t>(n_modified));
  if (!upserted.empty()) AppendArray(r, "upserted", upserted);
  if (!write_errors.empty()) {
    std::vector<Doc> sorted = write_errors;
    std::stable_sort(sorted.begin(), sorted.end(), [](const Doc& a, const Doc& b) {
      return FindInteger(a.get(), "index").value_or(0) < FindInteger(b.get(), "index").value_or(0);
    });
    AppendArray(r, "writeErrors", sorted);
  }
  if (write_concern_error) AppendDoc(r, "writeConcernError", *write_concern_error);
  if (cluster_time) bson_concat(r, cluster_time->get());
  BSON_APPEND_DOUBLE(r, "ok", 1.0);
  return reply;
}

BackendCommand FindIds(const ComputedWrite& w, const Doc& q, int32_t limit, const Doc& options) {
  BackendCommand find;
  bson_t* b = find.body.mut();
  AppendString(b, "find", w.rule().logical.collection);
  AppendDoc(b, "filter", q);
  Doc id_only;
  BSON_APPEND_INT32(id_only.mut(), "_id", 1);
  AppendDoc(b, "projection", id_only);
  BSON_APPEND_INT32(b, "limit", limit);
  BSON_APPEND_INT32(b, "batchSize", limit);
  BSON_APPEND_BOOL(b, "singleBatch", true);
  bson_concat(b, options.get());
  Seal(find, w.rule(), w.client(), ArgumentTarget::kRead);
  return find;
}

BackendCommand SourceFindAndModify(const ComputedRule& rule) {
  BackendCommand command;
  AppendString(command.body.mut(), "findAndModify", rule.logical.collection);
  command.may_fail = true;
  return command;
}

void Seal(BackendCommand& command, const ComputedRule& rule, const Command& client, ArgumentTarget target) {
  if (auto let = Find(client.body.get(), "let")) AppendValue(command.body.mut(), "let", *let);
  SealCommand(client, target, rule.logical.db, command.body.mut());
  command.may_fail = true;
}

// Inserts: computed fields set before storage; then each inserted
// document's contribution to its targets.
std::optional<Plan> ComputedInsert(const Command& command, const ComputedRule& rule) {
  const bson_t* body = command.body.get();
  std::optional<bson_iter_t> documents = Find(body, "documents");
  if (!documents || !BSON_ITER_HOLDS_ARRAY(&*documents)) return std::nullopt;  // the backend explains
  bson_iter_t first;
  if (!bson_iter_recurse(&*documents, &first) || !bson_iter_next(&first)) return std::nullopt;
  const bool ordered = FindBool(body, "ordered").value_or(true);

  auto state = std::make_shared<ComputedWrite>(rule, command);
  struct Accepted {
    size_t index;
    Doc doc;
  };
  auto accepted = std::make_shared<std::vector<Accepted>>();
  size_t index = 0;
  for (Doc& doc : ArrayDocuments(*documents)) {
    const size_t i = index++;
    if (rule.fields.empty()) {
      accepted->push_back({i, std::move(doc)});
      continue;
    }
    Doc out;
    if (auto error = WithComputedFields(rule, doc.get(), out)) {
      state->FailStatement(i, *error);
      if (ordered) break;
      continue;
    }
    accepted->push_back({i, std::move(out)});
  }
  if (accepted->empty()) {
    Plan plan;
    plan.immediate_reply = state->WriteReply(false);
    return plan;
  }

  BackendCommand insert;
  bson_t* b = insert.body.mut();
  AppendString(b, "insert", rule.logical.collection);
  BSON_APPEND_BOOL(b, "ordered", ordered);
  Seal(insert, rule, command, ArgumentTarget::kWrite);
  insert.sequence_id = "documents";
  for (const auto& a : *accepted) insert.sequence.push_back(a.doc);

  ComputedWrite* w = state.get();
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

std::optional<Plan> RewritePattern(const Command& command, const Rule& base, const ComputedRule& rule,
                                   const Capabilities&) {
  const std::string& name = command.name;
  if (name == "insert") return ComputedInsert(command, rule);
  if (name == "delete") return ComputedDelete(command, rule);
  if (name == "update") return ComputedUpdate(command, rule);
  if (name == "findAndModify" || name == "findandmodify") return ComputedFindAndModify(command, rule);
  if (name == "drop") return ComputedDrop(command, base.name, rule);
  return std::nullopt;
}

std::vector<Doc> ViewStages(const ComputedRule&) { return {}; }

}  // namespace remold
