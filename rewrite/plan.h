// Plan: what remold does for one client command that a rule rewrites.
//
// A Plan is data: the backend commands to run, in order, and a pure function
// that shapes their replies into the one reply the client expects. The
// proxy executes it; golden tests execute it against recorded replies.
// Nothing in a Plan touches a socket, a clock or global state.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/doc.h"

namespace remold {

// One command for the backend. Its body carries "$db". A large array
// argument (an update's "updates") travels as an OP_MSG document sequence.
struct BackendCommand {
  Doc body;
  std::string sequence_id;  // empty: no document sequence
  std::vector<Doc> sequence;
  // A follow-up whose failure must not become the client's reply (the
  // maintenance of a computed value after the client's write succeeded):
  // an ok: 0 reply is handed to the plan like any other.
  bool may_fail = false;
  // For a Plan::ensure: skipped while the collection it names does not
  // exist (an index a read wants must not create the collection; a later
  // command ensures it once the collection is there).
  bool skip_if_collection_missing = false;
  // For a Plan::ensure: an error reply with this code says the
  // prerequisite holds already (NamespaceExists for a create); 0: none.
  int holds_on_code = 0;
  // For a Plan::ensure: why the client's command needs it, said before the
  // backend's errmsg when it fails (the client gets that error).
  std::string needed_for;
};

struct ShapedReply {
  Doc reply;
  // Backend cursors (in the rule's backend namespace) the proxy must kill
  // after replying, e.g. the rest of a singleBatch find.
  std::vector<int64_t> cursors_to_kill;
  std::string kill_db;
  std::string kill_collection;
  // What went wrong without failing the client's command (a maintained
  // value left to reconciliation); the proxy logs each line.
  std::vector<std::string> warnings;
  // What went well but operators may want to know (a sync that set a
  // large number of copies); the proxy logs each line at info.
  std::vector<std::string> notices;
  // Documents the reply holds as they are stored, because they are not in
  // the rule's form and cannot be turned into it (written behind remold's
  // back): a plain collection would return them so. The proxy counts and
  // logs them.
  int64_t returned_as_stored = 0;
};

// What runs after some backend commands ran: the next commands, and what
// follows those, decided from all the replies so far (a read, then the
// writes that depend on what it found, then a check of what they did...).
struct Step;
using Continuation = std::function<Step(std::span<const Doc> replies)>;
struct Step {
  std::vector<BackendCommand> commands;
  Continuation then;  // empty: nothing follows
};

struct Plan {
  std::string rule;  // the rule's name, for logs and metrics

  // Set when remold answers by itself (a refusal, or nothing to do).
  std::optional<Doc> immediate_reply;

  // Idempotent prerequisites (index creation): run once per process before
  // the first command that needs them, and again only if they failed.
  std::vector<BackendCommand> ensure;

  std::vector<BackendCommand> commands;

  // When set, called after `commands` ran, with their replies; the step it
  // returns runs next (a write that depends on what a read found, e.g. the
  // one document an updateOne pins), and so on while a step has a `then`.
  // Each call sees every reply of the plan so far, in order.
  Continuation then;
  // What `then` runs, in words, one line each (for `remold explain`; the
  // commands themselves depend on the replies).
  std::vector<std::string> follow_ups;

  // When set, execution stops after a reply that carries writeErrors
  // (ordered writes); a reply with ok: 0 always stops execution, and that
  // reply goes to the client as it is.
  bool stop_on_write_errors = false;

  // Shapes the replies of the commands that ran (possibly fewer than
  // `commands` when execution stopped) into the client's reply.
  std::function<ShapedReply(std::span<const Doc> replies)> shape;
};

// Whether a backend reply says ok: 1.
bool IsOkReply(const Doc& reply);

// A plan that answers at once with `reply` (a refusal, or nothing to do).
Plan ImmediateReply(Doc reply);

// A plan of one command whose reply is the client's, as it is.
Plan Forwarded(BackendCommand command);

// `plan`, run after a prelude: `first`, then the commands `next` builds
// from its reply (none: straight on), and, up to `rounds` times, `first`
// again and its writes while it asks for some (a read limited to a batch,
// then what the batch left). The plan's own continuations and shape see
// only the plan's replies, as if it ran alone; a prelude reply with ok: 0
// ends everything with that reply, as usual. With `unfinished`, a prelude
// whose last round still asked for writes ends there: the client gets
// `unfinished` (a refusal) instead of the plan.
using PreludeWrites = std::function<std::vector<BackendCommand>(const Doc& first_reply)>;
Plan AfterPrelude(BackendCommand first, PreludeWrites next, Plan plan, int rounds = 1,
                  std::optional<Doc> unfinished = std::nullopt);

// The command as a person (or a golden file) reads it: its document
// sequence folded in as an array under the sequence id, before "$db".
Doc FoldedCommand(const BackendCommand& command);

// The killCursors the proxy sends after replying, for cursors_to_kill.
BackendCommand KillCursorsCommand(const ShapedReply& shaped);

}  // namespace remold
