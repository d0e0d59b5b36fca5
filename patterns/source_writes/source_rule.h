// What a pattern gives the shared write flows of patterns/source_writes/
// when other documents follow its collection's documents (maintained
// values, embedded subsets, copied references): the collection, the fields
// its followers read, and a Follower per client write that turns each
// document's change into follow-up commands.
//
// The flows (source_write.h) run the client's write so that each changed
// document's watched fields are known before and after it; each follower
// records them, then queues its follow-ups after the write. A pattern may
// also set same-document fields on the way in (the computed rule's
// `fields`), through the optional hooks.
// Pure.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/doc.h"
#include "rewrite/command.h"
#include "rewrite/command_queue.h"
#include "patterns/source_writes/update_apply.h"
#include "rules/namespace.h"

namespace remold {

// Keeps documents elsewhere in step with one client write.
class Follower {
 public:
  virtual ~Follower() = default;
  // A changed document's watched fields before and after the write
  // (nullptr: did not exist / no longer exists). Both have `_id`.
  virtual void Record(const bson_t* before, const bson_t* after) = 0;
  // Queues the follow-ups, once the client's write has been queued.
  virtual void Schedule(CommandQueue& queue) = 0;
};

// What a follower works with: the client's command, the warnings and
// notices of the reply (ShapedReply), and `abort`, called with an error reply when a follow-up failed
// inside the client's transaction (the backend aborted it).
struct FollowerContext {
  const Command& client;
  std::vector<std::string>* warnings;
  std::function<void(const Doc& error)> abort;
  std::vector<std::string>* notices;  // may be null: none are kept
};

// A follow-up's reply that failed (ok: 0, or write errors): outside a
// transaction a warning on the client's reply ("<what> failed: ...; run
// `remold reconcile` to repair it"); inside one, `abort` with the error
// (the backend aborted the transaction). Nothing when the reply is a success.
void ReportFollowUpFailure(const FollowerContext& context, const Doc& reply, const std::string& what);

class SourceRule {
 public:
  virtual ~SourceRule() = default;

  // The collection the client writes.
  virtual const Namespace& source() const = 0;
  // "a computed rule": how refusals name the rule.
  virtual std::string Kind() const = 0;
  // The top-level fields the followers read; a client update that can
  // change none of them (nor a same-document field) is not rewritten.
  virtual std::vector<std::string> Watched() const = 0;
  // What follows a client command `name` ("insert", "update", ...), in
  // words, one line each, for `remold explain`.
  virtual std::vector<std::string> FollowUps(const std::string& name) const = 0;
  // One follower per client write (none: only same-document fields).
  virtual std::vector<std::unique_ptr<Follower>> Followers(const FollowerContext& context) const = 0;

  // Same-document fields (optional). Fields an update may change that need
  // PrepareUpdate and a repair afterwards:
  virtual std::vector<std::string> DocumentFieldsWatched() const { return {}; }
  // A read the inserted documents need before they are prepared (the
  // documents they copy from), or nothing.
  virtual std::optional<BackendCommand> InsertPreRead(const std::vector<Doc>& /*documents*/,
                                                      const Command& /*client*/) const {
    return std::nullopt;
  }
  // An inserted document as it is stored (`out`), or why it is refused;
  // `pre_read` is the reply to InsertPreRead's command (nullptr: none).
  virtual std::optional<Refusal> PrepareInsert(const bson_t* /*doc*/, Doc& /*out*/,
                                               const Doc* /*pre_read*/) const {
    return std::nullopt;  // stored as sent: `out` is left empty
  }
  // A client's update as it is sent, or why it is refused.
  virtual std::optional<Refusal> PrepareUpdate(const ClientUpdate& update, ClientUpdate& out) const {
    out = update;
    return std::nullopt;
  }
  // Queues the repair of updated documents `ids` (each {v: _id}).
  virtual void ScheduleRepair(CommandQueue& /*queue*/, const FollowerContext& /*context*/,
                              std::vector<Doc> /*ids*/) const {}
};

}  // namespace remold
