// When a plan's write may be sent again after a write conflict (pure).
//
// mongod never answers WriteConflict (112) to a write outside a
// transaction: it undoes the attempt and runs it again itself. Other
// engines answer it: DocumentDB reports a PostgreSQL deadlock between
// concurrent multi-document writes as 112 (docs/backends.md). remold then
// does what mongod does, for a write whose failure is whole: a command of
// one statement (an update, delete or insert of one, a findAndModify)
// outside a client's transaction, which the conflict undid, so that
// sending it again applies it once. A command of several statements is
// never sent again: its reply does not say which of them were applied.
// Inside a transaction the conflict is the client's to see (drivers retry
// the whole transaction on its TransientTransactionError label).
#pragma once

#include "common/doc.h"
#include "rewrite/plan.h"

namespace remold {

// Times a plan sends one write again after a write conflict before the
// conflict stands as the reply.
inline constexpr int kWriteConflictResends = 5;

// Whether `reply` says `command` conflicted and changed nothing, so that
// sending it again is safe.
bool ResendAfterWriteConflict(const BackendCommand& command, const Doc& reply);

}  // namespace remold
