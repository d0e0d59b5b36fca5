// Decoding one client request into what the session needs to route it.
//
// DecodeRequest validates the message completely (framing, flags, checksum,
// every BSON document), unwraps OP_COMPRESSED in place, and extracts the
// command name and the flags that decide how many replies follow. Anything
// the proxy cannot trust comes back as a WireError in MongoDB's terms.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "proxy/wire/compression.h"
#include "proxy/wire/op_msg.h"
#include "proxy/wire/wire_error.h"
#include "proxy/wire/wire_format.h"

namespace remold::wire {

struct Request {
  MessageHeader header;             // of the (decompressed) message
  std::optional<Compressor> compressor;  // set when the client compressed it
  std::string command;              // first key of the command document
  bool more_to_come = false;        // the client expects no reply
  bool is_handshake = false;        // hello / isMaster
  std::vector<Compressor> offered_compressors;  // from a handshake's "compression"
  std::span<const uint8_t> command_document;    // body (OP_MSG) or query (OP_QUERY)
  std::vector<DocumentSequence> sequences;      // OP_MSG kind-1 sections

  bool is_legacy() const { return header.op_code == static_cast<int32_t>(OpCode::kQuery); }
};

// `message` holds one whole message as read from the client; on success it
// holds the decompressed message that goes to the backend, and `out` views
// into it (so `message` must not change while `out` is used).
std::optional<WireError> DecodeRequest(std::vector<uint8_t>& message, Request& out);

}  // namespace remold::wire
