#include "patterns/source_writes/source_write.h"

#include <algorithm>

#include "common/utf8.h"

namespace remold {

SourceWrite::SourceWrite(std::shared_ptr<const SourceRule> rule, const Command& client)
    : rule_(std::move(rule)), client_(client), queue_(std::make_shared<CommandQueue>()) {
  for (const auto& f : rule_->Watched())
    if (std::find(inputs_.begin(), inputs_.end(), f) == inputs_.end()) inputs_.push_back(f);
  followers_ = rule_->Followers(Context());
}

FollowerContext SourceWrite::Context() {
  return FollowerContext{client_, &warnings, [this](const Doc& error) { Abort(error); }, &notices};
}

void SourceWrite::Abort(const Doc& reply) {
  failure = reply;
  halted = stopped = true;
  queue_->Clear();
}

void SourceWrite::StatementFailed(size_t index, const Doc& reply) {
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

void ReportFollowUpFailure(const FollowerContext& context, const Doc& reply, const std::string& what) {
  std::string failure;
  int code = 8;  // UnknownError
  if (!IsOkReply(reply)) {
    failure = FindString(reply.get(), "errmsg").value_or("no errmsg");
  } else if (auto errors = Find(reply.get(), "writeErrors"); errors && BSON_ITER_HOLDS_ARRAY(&*errors)) {
    for (const Doc& error : ArrayDocuments(*errors)) {
      if (failure.empty()) code = static_cast<int>(FindInteger(error.get(), "code").value_or(8));
      failure += (failure.empty() ? "" : "; ") + FindString(error.get(), "errmsg").value_or("no errmsg");
    }
  }
  if (failure.empty()) return;
  if (InTransaction(context.client)) {
    // The backend aborted the client's transaction: it gets the error.
    context.abort(IsOkReply(reply) ? ErrorReply(code, "", "remold: " + what + " failed: " + failure) : reply);
    return;
  }
  context.warnings->push_back(what + " failed: " + failure + "; run `remold reconcile` to repair it");
}

Doc RetryableWriteRefused(const SourceRule& rule, const std::string& what) {
  return ErrorReply(error_codes::kInvalidOptions,
                    "remold: " + what + " on " + rule.source().full() + " (" + rule.Kind() +
                        ") cannot stay a retryable write: remold runs it as one "
                        "command per document, which the backend cannot deduplicate on a retry. "
                        "Send the statements one per command, or use a transaction");
}

Doc OneDocument(const bson_iter_t& id, const Doc& q) {
  Doc query;
  AppendValue(query.mut(), "_id", id);
  if (!q.empty()) AppendArray(query.mut(), "$and", {q});
  return query;
}

Doc SourceWrite::InputProjection() const {
  Doc projection;
  BSON_APPEND_INT32(projection.mut(), "_id", 1);
  for (const auto& f : inputs_)
    if (f != "_id") BSON_APPEND_INT32(projection.mut(), f.c_str(), 1);
  return projection;
}

void SourceWrite::Record(const bson_t* before, const bson_t* after) {
  for (auto& f : followers_) f->Record(before, after);
}

void SourceWrite::ScheduleFollowUps() {
  queue_->AddPhase([this] {
    if (!repair_ids_.empty()) rule_->ScheduleRepair(*queue_, Context(), std::move(repair_ids_));
  });
  for (auto& f : followers_) f->Schedule(*queue_);
}

Plan SourceWrite::Finish(std::function<ShapedReply()> shape) {
  Plan plan;
  queue_->Install(plan);
  plan.follow_ups = rule_->FollowUps(client_.name == "findandmodify" ? "findAndModify" : client_.name);
  plan.shape = [this, shape = std::move(shape)](std::span<const Doc> replies) {
    ShapedReply shaped = failure ? ShapedReply{*failure, {}, {}, {}, warnings, {}} : shape();
    shaped.notices = notices;
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

void SourceWrite::NoteReply(const Doc& reply) {
  if (auto wce = FindDocument(reply.get(), "writeConcernError")) write_concern_error = wce;
  Doc times;
  for (const char* key : {"$clusterTime", "operationTime"})
    if (auto v = Find(reply.get(), key)) AppendValue(times.mut(), key, *v);
  if (!times.empty()) cluster_time = std::move(times);
}

void SourceWrite::FailStatement(size_t index, int code, const std::string& code_name,
                                  const std::string& errmsg) {
  Doc error;
  BSON_APPEND_INT32(error.mut(), "index", static_cast<int32_t>(index));
  BSON_APPEND_INT32(error.mut(), "code", code);
  if (!code_name.empty()) AppendString(error.mut(), "codeName", code_name);
  AppendString(error.mut(), "errmsg", ValidUtf8(errmsg));
  write_errors.push_back(std::move(error));
}

void SourceWrite::FailStatement(size_t index, const Doc& reply) {
  FailStatement(index, static_cast<int>(FindInteger(reply.get(), "code").value_or(8)),
                FindString(reply.get(), "codeName").value_or(""),
                FindString(reply.get(), "errmsg").value_or("the backend refused the write"));
}

Doc SourceWrite::WriteReply(bool with_modified) const {
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

BackendCommand FindIds(const SourceWrite& w, const Doc& q, int32_t limit, const Doc& options) {
  BackendCommand find;
  bson_t* b = find.body.mut();
  AppendString(b, "find", w.source().collection);
  AppendDoc(b, "filter", q);
  Doc id_only;
  BSON_APPEND_INT32(id_only.mut(), "_id", 1);
  AppendDoc(b, "projection", id_only);
  BSON_APPEND_INT32(b, "limit", limit);
  BSON_APPEND_INT32(b, "batchSize", limit);
  BSON_APPEND_BOOL(b, "singleBatch", true);
  bson_concat(b, options.get());
  Seal(find, w.source(), w.client(), ArgumentTarget::kRead);
  return find;
}

BackendCommand SourceFindAndModify(const Namespace& source) {
  BackendCommand command;
  AppendString(command.body.mut(), "findAndModify", source.collection);
  command.may_fail = true;
  return command;
}

namespace {

// Whether `query` pins _id to one value where a conjunction reads it: at
// its top level, in $and (at any depth) or in a $or of one clause, by a
// value, $eq, a $in of one value or $all (the positions from which MongoDB
// takes an upsert's equality fields, and $in of one).
bool PinsId(const bson_t* query) {
  bson_iter_t it;
  if (!bson_iter_init(&it, query)) return false;
  while (bson_iter_next(&it)) {
    const std::string_view key = bson_iter_key(&it);
    if (key == "_id") {
      if (!BSON_ITER_HOLDS_DOCUMENT(&it)) return true;
      bson_iter_t op;
      bson_iter_recurse(&it, &op);
      while (bson_iter_next(&op)) {
        const std::string_view name = bson_iter_key(&op);
        if (name.empty() || name[0] != '$' || name == "$eq" || name == "$all") return true;
        if (name == "$in" && BSON_ITER_HOLDS_ARRAY(&op)) {
          bson_iter_t values;
          bson_iter_recurse(&op, &values);
          int count = 0;
          while (bson_iter_next(&values)) ++count;
          if (count == 1) return true;
        }
      }
    } else if ((key == "$and" || key == "$or") && BSON_ITER_HOLDS_ARRAY(&it)) {
      const std::vector<Doc> clauses = ArrayDocuments(it);
      if (key == "$or" && clauses.size() != 1) continue;
      for (const Doc& clause : clauses)
        if (PinsId(clause.get())) return true;
    }
  }
  return false;
}

// See Seal (source_write.h).
bool NeedsRemoveOrder(const bson_t* body) {
  if (!FindBool(body, "remove").value_or(false) || Find(body, "sort")) return false;
  if (Find(body, "let") || Find(body, "collation")) return true;
  std::optional<Doc> query = FindDocument(body, "query");
  return query && PinsId(query->get());
}

}  // namespace

void Seal(BackendCommand& command, const Namespace& source, const Command& client, ArgumentTarget target) {
  if (auto let = Find(client.body.get(), "let")) AppendValue(command.body.mut(), "let", *let);
  if (NeedsRemoveOrder(command.body.get())) {
    Doc by_id;
    BSON_APPEND_INT32(by_id.mut(), "_id", 1);
    AppendDoc(command.body.mut(), "sort", by_id);
  }
  SealCommand(client, target, source.db, command.body.mut());
  command.may_fail = true;
}

}  // namespace remold
