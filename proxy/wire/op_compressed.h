// OP_COMPRESSED (2012): an envelope around another message's body.
//
// Layout after the header: int32 originalOpcode, int32 uncompressedSize
// (body size, header excluded), uint8 compressorId, compressed body.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "proxy/wire/compression.h"
#include "proxy/wire/wire_error.h"

namespace remold::wire {

// Decodes `message` (a whole OP_COMPRESSED message) into the original
// message, header included, in `out`. Reports the compressor it used.
std::optional<WireError> DecompressMessage(std::span<const uint8_t> message, std::vector<uint8_t>& out,
                                           Compressor& used);

// Wraps the whole message `message` into an OP_COMPRESSED with `compressor`,
// keeping its requestID and responseTo.
std::vector<uint8_t> CompressMessage(std::span<const uint8_t> message, Compressor compressor);

}  // namespace remold::wire
