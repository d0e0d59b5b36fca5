// Edits of a client's handshake request (hello / isMaster) before it goes
// to a backend connection: fields removed, fields added, OP_MSG flags
// cleared. The message keeps its protocol (OP_MSG, or OP_QUERY on
// admin.$cmd, where a {$query: ...} wrapper's command is the one edited),
// its IDs and everything not named.
// Pure: bytes in, bytes out.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace remold::wire {

struct HandshakeEdit {
  // Top-level fields of the command removed.
  std::span<const std::string_view> drop;
  // A BSON document whose elements are appended to the command (empty: none).
  std::span<const uint8_t> append;
  // OP_MSG flag bits cleared (ignored for OP_QUERY).
  uint32_t clear_flags = 0;
};

// nullopt when `message` is not a well-formed handshake request.
std::optional<std::vector<uint8_t>> EditHandshake(std::span<const uint8_t> message, const HandshakeEdit& edit);

}  // namespace remold::wire
