// The delete statements remold sends for a client's delete of one document
// (pure).
//
// A statement of limit 1 whose filter pins _id to one value, without a
// collation of its own, matches at most one document (the _id index is
// unique under the collection's collation, which the statement uses): it
// is sent with limit 0, which deletes the same document. The two forms are
// the same on every engine but one: DocumentDB's delete of limit 1 passes
// a document by when a concurrent write changed it meanwhile, and answers
// n 0 with the document still stored (docs/backends.md); its delete of
// limit 0 re-reads the changed document and deletes it, as mongod does
// with both forms. remold's own writes (migrate, maintained values) are
// such concurrent writes, so this keeps them from failing a client's
// delete. A command with a txnNumber (a retryable write, or one of a
// transaction) keeps its limit: mongod refuses a retryable delete of limit
// 0 (72), and a retried statement must be the one first sent. Every other
// statement is sent as it is.
#pragma once

#include "common/doc.h"
#include "rewrite/command.h"

namespace remold {

// `sent`, the statement remold sends for the client's `statement` ({q,
// limit, ...}; sent's filter matches no document the client's does not),
// with limit 0 when the client's statement pins _id as above and `command`,
// the client's delete, has no txnNumber.
Doc OneDocumentDelete(const Command& command, const Doc& statement, const Doc& sent);

}  // namespace remold
