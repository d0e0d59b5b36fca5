// The writes of a collection that other documents follow (source_rule.h):
// the state one rewritten client write carries from its first backend
// command to the client's reply, and the flows for each write command.
//
// Deletes and updates that can change a watched field read the documents
// they change through findAndModify, so each follower sees exactly the
// documents changed, as they were and as they are. Inserts are sent as one
// command and recorded from what was sent. Writes that touch nothing
// watched are not rewritten. The client's txnNumber stays on a write that
// is one backend command; other retryable writes are refused.
// Pure.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "patterns/source_writes/source_rule.h"
#include "rewrite/command.h"
#include "rewrite/command_queue.h"
#include "rewrite/plan.h"

namespace remold {

class SourceWrite {
 public:
  SourceWrite(std::shared_ptr<const SourceRule> rule, const Command& client);
  SourceWrite(const SourceWrite&) = delete;
  SourceWrite& operator=(const SourceWrite&) = delete;

  const SourceRule& rule() const { return *rule_; }
  const Namespace& source() const { return rule_->source(); }
  const Command& client() const { return client_; }
  CommandQueue& queue() { return *queue_; }

  // The fields the followers read, and the projection {_id, inputs...}
  // that reads them.
  const std::vector<std::string>& inputs() const { return inputs_; }
  Doc InputProjection() const;
  bool has_followers() const { return !followers_.empty(); }

  // A source document changed: inputs before and after (nullptr: none).
  void Record(const bson_t* before, const bson_t* after);
  // A document whose same-document fields need repair.
  void Repair(const bson_iter_t& id) { repair_ids_.push_back(Boxed(id)); }

  // Queues the repair and the followers' phases; call after the client's
  // write has been queued.
  void ScheduleFollowUps();
  // Plan.commands and then, and the shape from `shape`.
  Plan Finish(std::function<ShapedReply()> shape);

  // The client's write reply, as it accumulates.
  int64_t n = 0;
  int64_t n_modified = 0;
  std::vector<Doc> write_errors;  // {index, code, codeName?, errmsg}
  std::vector<Doc> upserted;      // {index, _id}
  std::optional<Doc> write_concern_error;
  std::optional<Doc> cluster_time;  // {$clusterTime, operationTime} of the last client write
  bool stopped = false;             // an ordered write failed
  bool halted = false;              // no further statement runs, ordered or not
  std::optional<Doc> failure;       // the reply the client gets as it is
  std::vector<std::string> warnings;
  std::vector<std::string> notices;

  // Folds one backend write reply's generic fields in.
  void NoteReply(const Doc& reply);
  // Records a failed statement (an ok: 0 reply, or a refusal).
  void FailStatement(size_t index, int code, const std::string& code_name, const std::string& errmsg);
  void FailStatement(size_t index, const Refusal& refusal) {
    FailStatement(index, refusal.code.value, std::string(refusal.code.name), refusal.message);
  }
  void FailStatement(size_t index, const Doc& error_reply);
  // A backend ok: 0 reply to the client's own write. One that drivers act
  // on (errorLabels: retryable, transient) or that ends the client's
  // transaction goes back as it is; any other is a write error at `index`.
  void StatementFailed(size_t index, const Doc& reply);
  // Inside the client's transaction, a follow-up failed: the backend
  // aborted the transaction; nothing more runs, and the client gets `reply`.
  void Abort(const Doc& reply);
  // The client's write reply: {n, [nModified], [upserted], [writeErrors], ok}.
  Doc WriteReply(bool with_modified) const;

 private:
  FollowerContext Context();

  std::shared_ptr<const SourceRule> rule_;
  Command client_;
  std::shared_ptr<CommandQueue> queue_;
  std::vector<std::string> inputs_;
  std::vector<std::unique_ptr<Follower>> followers_;
  std::vector<Doc> repair_ids_;
};

// The flows; each returns nullopt when the write needs nothing of remold.
std::optional<Plan> FollowedInsert(const Command& command, std::shared_ptr<const SourceRule> rule);
std::optional<Plan> FollowedDelete(const Command& command, std::shared_ptr<const SourceRule> rule);
std::optional<Plan> FollowedUpdate(const Command& command, std::shared_ptr<const SourceRule> rule);
std::optional<Plan> FollowedFindAndModify(const Command& command, std::shared_ptr<const SourceRule> rule);
// drop: refused with `refusal` (InvalidOptions) while `source` has documents.
std::optional<Plan> FollowedDrop(const Command& command, const Namespace& source, const std::string& refusal);

// A findAndModify on `source`; `query` and the rest are appended by the
// caller, then Seal() adds the generic arguments and $db.
//
// Seal also gives a findAndModify that removes, and has no sort, the sort
// {_id: 1} when its query pins _id to one value (at its top level, in $and,
// or in a $or of one clause: by a value, $eq, $all or a $in of one) or it
// carries let or collation. The document removed is the same on every
// engine (a query that pins _id matches one document; the others keep
// their engine-chosen document), and DocumentDB never runs it with a cached
// plan: it caches one plan for every unsorted findAndModify remove of a
// collection, whatever the query's shape, and a second shape run with the
// first one's plan crashes the server process (docs/backends.md).
BackendCommand SourceFindAndModify(const Namespace& source);
void Seal(BackendCommand& command, const Namespace& source, const Command& client, ArgumentTarget target);

// {find, filter: q, projection: {_id: 1}, limit, batchSize: limit,
// singleBatch, <options>} on the rule's collection: the _ids q matches.
BackendCommand FindIds(const SourceWrite& w, const Doc& q, int32_t limit, const Doc& options);

// A write outside a transaction that the client may retry (it carries a
// txnNumber): one the rewrite can keep exactly-once only as one command.
bool IsRetryableWrite(const Command& client);

// The refusal of a retryable write remold cannot keep exactly-once.
Doc RetryableWriteRefused(const SourceRule& rule, const std::string& what);

// {_id: <id>, $and: [q]}: q, for one document (the _id first, for any
// backend's fast path).
Doc OneDocument(const bson_iter_t& id, const Doc& q);

}  // namespace remold
