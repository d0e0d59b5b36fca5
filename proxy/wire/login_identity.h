// Who an authentication conversation logs in as, read from its first
// message: the key of the pooled backend connections it may use once it
// succeeds (proxy/backend_pool.h).
//
// The key is the database, the mechanism and the user exactly as the
// client sent them (a SCRAM client-first message's authzid and n=, PLAIN's
// authzid and authcid, the `user` of `authenticate`), never normalised:
// two different users can never share a key. A mechanism whose user
// remold cannot read (GSSAPI, MONGODB-AWS, MONGODB-OIDC...) has no key.
// Pure.
#pragma once

#include <optional>
#include <span>
#include <string>

namespace remold::wire {

// The key of a saslStart or authenticate command document (with its $db);
// nullopt when it is neither or its user cannot be read.
std::optional<std::string> LoginIdentity(std::span<const uint8_t> command);

// Whether a saslStart / saslContinue reply document says `done: true`.
bool ConversationDone(std::span<const uint8_t> reply);

}  // namespace remold::wire
