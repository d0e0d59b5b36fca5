// Constants and the message header of the MongoDB wire protocol.
//
// Every message starts with a 16-byte header: messageLength (including the
// header), requestID, responseTo, opCode. remold accepts messages of
// kMinMessageSize..kMaxMessageSize bytes and closes a connection whose
// framing cannot be trusted.
#pragma once

#include <cstdint>
#include <span>

#include "proxy/wire/byte_io.h"

namespace remold::wire {

enum class OpCode : int32_t {
  kReply = 1,
  kUpdate = 2001,
  kInsert = 2002,
  kQuery = 2004,
  kGetMore = 2005,
  kDelete = 2006,
  kKillCursors = 2007,
  kCompressed = 2012,
  kMsg = 2013,
};

inline constexpr int32_t kHeaderSize = 16;
inline constexpr int32_t kMinMessageSize = kHeaderSize;
inline constexpr int32_t kMaxMessageSize = 48'000'000;
inline constexpr int32_t kMaxBsonObjectSize = 16 * 1024 * 1024;

// OP_MSG flagBits. Bits 0-15 are "required": a receiver must reject unknown
// ones. Bits 16-31 are optional and may be ignored.
namespace msg_flags {
inline constexpr uint32_t kChecksumPresent = 1u << 0;
inline constexpr uint32_t kMoreToCome = 1u << 1;
inline constexpr uint32_t kExhaustAllowed = 1u << 16;
inline constexpr uint32_t kKnownRequired = kChecksumPresent | kMoreToCome;
inline constexpr uint32_t kRequiredMask = 0xFFFFu;
}  // namespace msg_flags

struct MessageHeader {
  int32_t message_length = 0;
  int32_t request_id = 0;
  int32_t response_to = 0;
  int32_t op_code = 0;
};

// Reads the header at the start of `bytes`, which holds at least kHeaderSize.
inline MessageHeader ReadHeader(std::span<const uint8_t> bytes) {
  const uint8_t* p = bytes.data();
  return {LoadInt32(p), LoadInt32(p + 4), LoadInt32(p + 8), LoadInt32(p + 12)};
}

inline void WriteHeader(uint8_t* out, const MessageHeader& h) {
  StoreInt32(out, h.message_length);
  StoreInt32(out + 4, h.request_id);
  StoreInt32(out + 8, h.response_to);
  StoreInt32(out + 12, h.op_code);
}

inline bool IsValidMessageLength(int32_t length) {
  return length >= kMinMessageSize && length <= kMaxMessageSize;
}

}  // namespace remold::wire
