// The handshake (hello / isMaster) as remold presents it to drivers.
//
// Drivers discover topology from the handshake reply. remold shows itself as
// one mongos-like endpoint: the backend's replica-set membership (hosts,
// setName, primary, me, ...) is removed so no driver connects around the
// proxy, `msg` is "isdbgrid", limits are capped at what remold accepts, and
// `compression` lists only compressors both the client offered and remold
// can decode, and it is always writable (`ismaster`/`isWritablePrimary`
// true, as a mongos answers). Everything else (wire versions, session timeout, auth fields,
// topologyVersion for streaming hello) is kept as the backend sent it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "proxy/wire/compression.h"
#include "proxy/wire/wire_format.h"

namespace remold::wire {

bool IsHandshakeCommand(std::string_view command);

// The compressors a hello/isMaster command document offers, in its order,
// keeping only those remold supports (snappy, zlib, zstd).
std::vector<Compressor> OfferedCompressors(std::span<const uint8_t> hello_command);

// Rewrites the backend's handshake reply document `reply` as described
// above (a failed handshake, ok other than 1, is returned as it is: an
// error is no server description); `negotiated` becomes the reply's "compression" (omitted if empty).
// maxMessageSizeBytes is capped at `max_message_size` (remold's limit for
// client messages), and added when the backend sent none and the limit is
// below the wire protocol's.
std::vector<uint8_t> RewriteHandshakeReply(std::span<const uint8_t> reply,
                                           std::span<const Compressor> negotiated,
                                           int32_t max_message_size = kMaxMessageSize);

// The reply document of a whole handshake reply message (OP_MSG body or the
// single OP_REPLY document), viewing into `message`; nullopt if malformed.
std::optional<std::span<const uint8_t>> HandshakeReplyDocument(std::span<const uint8_t> message);

// Applies RewriteHandshakeReply to a whole reply message (OP_MSG, or OP_REPLY
// for a legacy OP_QUERY handshake), in place, keeping its IDs and flags
// (moreToCome of a streaming hello included). Returns false, leaving the
// message untouched, when it is not a well-formed reply.
bool RewriteHandshakeMessage(std::vector<uint8_t>& message,
                             std::span<const Compressor> negotiated,
                             int32_t max_message_size = kMaxMessageSize);

}  // namespace remold::wire
