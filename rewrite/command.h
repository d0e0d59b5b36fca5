// Command: one decoded client command, as the rewrite engine sees it, and
// the rules for carrying the client's generic arguments onto the backend
// commands that replace it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/doc.h"
#include "common/error_code.h"
#include "rewrite/plan.h"
#include "rules/namespace.h"

namespace remold {

struct Command {
  std::string db;    // from "$db"
  std::string name;  // the first key
  Doc body;          // OP_MSG document sequences folded in as arrays
};

// The command a document states: its first key names it; "$db" its
// database, or `default_db` (then added to the body). nullopt when the
// document is empty or names no database.
std::optional<Command> CommandFromDocument(Doc body, std::string_view default_db = {});

// What kind of backend command receives the generic arguments.
enum class ArgumentTarget {
  kRead,   // gets readConcern; txnNumber only inside a transaction
  kWrite,  // gets writeConcern and txnNumber (retryable writes)
  kAdmin,  // index builds and the like: only comment and maxTimeMS
  // An idempotent write that prepares the client's own write: as kWrite,
  // but the client's txnNumber only inside a transaction (outside, it
  // belongs to the one command that carries the client's write).
  kPreparatoryWrite,
};

// Copies the client's generic arguments (lsid, txnNumber, autocommit,
// startTransaction, $clusterTime, readConcern, writeConcern,
// $readPreference, comment, maxTimeMS, apiVersion, ...) onto `out`, as
// MongoDB allows them on a command of kind `target`. Never drops one that
// changes the client's semantics for the command that carries the write.
void CopyGenericArguments(const Command& client, ArgumentTarget target, bson_t* out);

// The client's generic arguments (as CopyGenericArguments), then "$db": the
// last fields of every backend command remold builds for a client command.
void SealCommand(const Command& client, ArgumentTarget target, std::string_view db, bson_t* out);

// {update: <target.collection>, ordered, <generic arguments>, $db} with
// `statements` as its "updates" document sequence.
BackendCommand UpdateCommand(const Command& client, ArgumentTarget arguments,
                             const Namespace& target, bool ordered, std::vector<Doc> statements);

// `statements` ({q, u, ...}) ordered by their filters' bytes: the order of
// the documents an unordered write of several statements locks, for a
// follow-up whose statements each name one document. Two such writes then
// lock the documents they share in the same order, and never wait on each
// other: an engine that holds a write's row locks until it ends (DocumentDB)
// would otherwise deadlock them and fail one after a part of it was
// applied (docs/backends.md).
std::vector<Doc> InLockOrder(std::vector<Doc> statements);

// True when the client runs this command inside a multi-document transaction.
bool InTransaction(const Command& command);

// Why remold refuses a command or one of its statements, in MongoDB's terms.
struct Refusal {
  ErrorCode code;
  std::string message;
};

// {ok: 0, errmsg, code, codeName}
Doc ErrorReply(ErrorCode code, std::string_view message);
inline Doc ErrorReply(const Refusal& refusal) { return ErrorReply(refusal.code, refusal.message); }
// The same for a code that came from the backend (its name may be absent).
Doc ErrorReply(int code, std::string_view code_name, std::string_view message);

}  // namespace remold
