// A client's hello as it may go on a shared (pooled) backend connection.
//
// A pooled connection carries the requests of many clients, so a client's
// handshake must not set anything on it that belongs to that client or
// that holds the connection:
//   client                   metadata may be set once per connection
//                            (a second is error 186, ClientMetadataCannotBeMutated);
//   speculativeAuthenticate  would authenticate the shared connection; the
//                            driver then authenticates with saslStart, as
//                            the authentication specification says it must
//                            when the reply has no speculativeAuthenticate;
//   compression              the pooled connection has negotiated its own;
//   topologyVersion,         an awaitable hello holds the connection up to
//   maxAwaitTimeMS,          maxAwaitTimeMS and exhaust streams it for good:
//   exhaustAllowed           remold waits on its side (AwaitableHelloWait)
//                            and sends a plain hello after.
// Pure: bytes in, bytes out.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace remold::wire {

// `message` (a client's hello / isMaster, OP_MSG or OP_QUERY) without the
// fields above and without OP_MSG's exhaustAllowed; nullopt when it is not
// a well-formed handshake request.
std::optional<std::vector<uint8_t>> SharedLinkHello(std::span<const uint8_t> message);

// How long an awaitable hello (one with topologyVersion and maxAwaitTimeMS,
// `command` its command document) asks the server to wait for a topology
// change; nullopt for a hello that must be answered at once.
std::optional<std::chrono::milliseconds> AwaitableHelloWait(std::span<const uint8_t> command);

}  // namespace remold::wire
