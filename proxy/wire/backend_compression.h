// Compression on the backend link: what remold offers the backend (the
// backend URI's compressors=...), what the backend chose, and which
// messages stay plain.
//
// The offer rides on the first hello a backend connection carries: the
// client's own handshake, its `compression` replaced by remold's list (the
// client's list is for its link to remold), or, on a connection no client
// handshake reaches first (another member, a replaced connection),
// OfferHello, a hello of remold's own without client metadata. The first
// compressor of the backend's reply that remold offered is the
// connection's; the compression specification keeps the handshake, the
// authentication conversation and user management plain.
// Pure: bytes in, bytes out.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "proxy/wire/compression.h"

namespace remold::wire {

// Whether a command may be sent compressed (not hello, isMaster, saslStart,
// saslContinue, getnonce, authenticate, createUser, updateUser, copydb...).
bool MayCompress(std::string_view command);

// A client's handshake message (OP_MSG, or OP_QUERY on admin.$cmd) with
// its command's `compression` set to `offer`, keeping everything else;
// nullopt when it is not a well-formed handshake request.
std::optional<std::vector<uint8_t>> WithCompressionOffer(std::span<const uint8_t> message,
                                                         std::span<const Compressor> offer);

// {isMaster: 1, compression: offer, $db: "admin"}: remold's own offer on a
// connection no client handshake reached first (isMaster: every server
// version remold supports answers it).
std::vector<uint8_t> OfferHelloCommand(std::span<const Compressor> offer);

// What a handshake reply document says the connection compresses with: the
// first compressor of its `compression` that is in `offer`.
std::optional<Compressor> ChosenCompressor(std::span<const uint8_t> reply_document,
                                           std::span<const Compressor> offer);

}  // namespace remold::wire
