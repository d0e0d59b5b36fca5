// OP_MSG (opcode 2013): flagBits, sections, optional CRC-32C checksum.
//
// A section is kind 0 (exactly one: the command body, a BSON document) or
// kind 1 (a document sequence: int32 size, cstring identifier, documents).
// ParseOpMsg validates framing, flags, checksum and every document, and
// returns views into the message bytes, which must outlive the view.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "proxy/wire/wire_error.h"
#include "proxy/wire/wire_format.h"

namespace remold::wire {

struct DocumentSequence {
  std::string_view identifier;
  std::vector<std::span<const uint8_t>> documents;
};

struct OpMsgView {
  uint32_t flags = 0;
  std::span<const uint8_t> body;
  std::vector<DocumentSequence> sequences;

  bool more_to_come() const { return flags & msg_flags::kMoreToCome; }
  bool exhaust_allowed() const { return flags & msg_flags::kExhaustAllowed; }
  bool checksum_present() const { return flags & msg_flags::kChecksumPresent; }
};

// `message` is a whole message, header included, whose opcode is OP_MSG.
std::optional<WireError> ParseOpMsg(std::span<const uint8_t> message, OpMsgView& out);

// The flagBits of an OP_MSG whose size is already known to be >= 20 bytes.
inline uint32_t PeekOpMsgFlags(std::span<const uint8_t> message) {
  return LoadUint32(message.data() + kHeaderSize);
}

// Encodes an OP_MSG with one kind-0 section. `flags` must not include
// kChecksumPresent unless `with_checksum` (it is then set and computed).
std::vector<uint8_t> EncodeOpMsg(int32_t request_id, int32_t response_to, uint32_t flags,
                                 std::span<const uint8_t> body, bool with_checksum = false);

// Encodes an OP_MSG with a kind-0 body followed by one kind-1 document
// sequence named `sequence_id` (skipped when the id is empty).
std::vector<uint8_t> EncodeOpMsgWithSequence(int32_t request_id, uint32_t flags,
                                             std::span<const uint8_t> body,
                                             std::string_view sequence_id,
                                             std::span<const std::span<const uint8_t>> documents);

}  // namespace remold::wire
