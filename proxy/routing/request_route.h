// Where a client request must go in a replica set or behind mongos: the
// primary, a member chosen by the request's read preference, the member
// holding its cursor, or the member running its transaction. Pure: it
// reads the decoded request only.
//
// Writes, and every command not known to be a read, go to the primary
// whatever `$readPreference` says (as mongos routes them). A read follows
// its `$readPreference`, validated as mongos does; without one it goes to
// the primary.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <variant>

#include "proxy/routing/server_selection.h"
#include "proxy/wire/request.h"

namespace remold {

struct RequestRoute {
  enum class Kind {
    kPrimary,
    kRead,       // by `preference`
    kCursor,     // getMore / killCursors of `cursor_id`
    kHandshake,  // hello / isMaster: the primary, else any member that answers
  };
  Kind kind = Kind::kPrimary;
  ReadPreference preference;
  int64_t cursor_id = 0;
  // The lsid (its BSON bytes) of a request inside a transaction
  // (autocommit: false); empty otherwise.
  std::string transaction;
  bool starts_transaction = false;  // startTransaction: true
  bool may_open_cursor = false;     // its reply may hold a cursor to pin
  // Part of an authentication conversation (saslStart, saslContinue,
  // authenticate, a handshake with speculativeAuthenticate): the client's
  // credentials then live on that backend connection only.
  bool authenticates = false;
};

std::variant<RequestRoute, SelectionError> RouteOf(const wire::Request& request,
                                                  std::chrono::milliseconds heartbeat);

// Whether `request` is part of an authentication conversation: saslStart,
// saslContinue, authenticate, or a handshake with speculativeAuthenticate.
bool IsAuthentication(const wire::Request& request);

// `cursor.id` of a reply document; 0 when it has none (or is exhausted).
int64_t ReplyCursorId(std::span<const uint8_t> reply_document);

// Codes a member answers with when it is not (or no longer) the primary:
// the specification's "not writable primary" and "node is recovering".
bool IsNotPrimaryCode(int32_t code);

}  // namespace remold
