// In pooled mode (proxy/backend_pool.h), what keeps a client on one backend
// connection, and for how long. Everything else runs on whichever pooled
// connection of the client's member and identity is free: a session (lsid)
// is an object of the server's, not of a connection's.
//
//   cursor          a cursor's getMore and killCursors go to the connection
//                   that opened it, until the cursor is exhausted or killed;
//   transaction     a transaction's statements go to the connection of its
//                   startTransaction, until the reply of commitTransaction
//                   or abortTransaction.
//                   Both wait for that connection when another client has
//                   it for a request, and it serves others between them:
//                   holding it would deadlock a driver that sends one
//                   transaction's statements over several of its
//                   connections. Both are per client connection: a getMore
//                   or statement that the driver sends over another of its
//                   connections goes to any pooled connection, as it goes
//                   to another backend connection without pooling (the
//                   server keeps cursors and transactions by session, not
//                   by connection). A cursor's or transaction's connection
//                   is never closed to make room;
//   authentication  a conversation (saslStart ... done), held;
//   exhaust         a reply stream with moreToCome, held until it ends (the
//                   relay holds it: one request);
//   connection      what the server ties to the connection itself, held for
//                   the rest of the client's connection: the legacy
//                   getLastError family, currentOp and killOp, logout, an
//                   admin aggregate (a $currentOp of its own connection), and
//                   a login remold cannot key (LoginIdentity).
// Pure: reads the decoded request only.
#pragma once

#include <cstddef>
#include <string_view>

#include "proxy/wire/request.h"

namespace remold {

enum class PinReason : size_t { kCursor, kTransaction, kAuthentication, kExhaust, kConnection, kCount };
std::string_view PinReasonName(PinReason reason);

// Whether `request` ties its client to the connection it runs on for good
// (the "connection" reason above).
bool IsConnectionScoped(const wire::Request& request);

// Whether `request` ends a transaction (commitTransaction, abortTransaction).
bool EndsTransaction(const wire::Request& request);

}  // namespace remold
