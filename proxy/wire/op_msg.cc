#include "proxy/wire/op_msg.h"

#include <cstring>
#include <string>

#include "proxy/wire/bson_check.h"
#include "proxy/wire/byte_io.h"
#include "proxy/wire/crc32c.h"

namespace remold::wire {
namespace {

constexpr size_t kFlagsSize = 4;
constexpr size_t kChecksumSize = 4;

std::optional<WireError> ParseDocument(std::span<const uint8_t> bytes, size_t& consumed,
                                       std::span<const uint8_t>& doc) {
  std::optional<int32_t> length = DocumentLength(bytes);
  if (!length) return InvalidBson("document length is invalid or exceeds its section");
  doc = bytes.first(static_cast<size_t>(*length));
  if (auto error = ValidateDocument(doc)) return error;
  consumed = static_cast<size_t>(*length);
  return std::nullopt;
}

std::optional<WireError> ParseSequence(std::span<const uint8_t> bytes, size_t& consumed,
                                       DocumentSequence& out) {
  if (bytes.size() < 4) return ProtocolError("truncated document sequence size");
  int32_t size = LoadInt32(bytes.data());
  if (size < 5 || static_cast<size_t>(size) > bytes.size())
    return ProtocolError("document sequence size exceeds the message");
  std::span<const uint8_t> section = bytes.subspan(4, static_cast<size_t>(size) - 4);
  const char* id = reinterpret_cast<const char*>(section.data());
  size_t id_length = strnlen(id, section.size());
  if (id_length == section.size())
    return ProtocolError("document sequence identifier is not NUL-terminated");
  if (id_length == 0) return ProtocolError("document sequence identifier is empty");
  out.identifier = {id, id_length};
  std::span<const uint8_t> docs = section.subspan(id_length + 1);
  while (!docs.empty()) {
    size_t used = 0;
    std::span<const uint8_t> doc;
    if (auto error = ParseDocument(docs, used, doc)) return error;
    out.documents.push_back(doc);
    docs = docs.subspan(used);
  }
  consumed = static_cast<size_t>(size);
  return std::nullopt;
}

}  // namespace

std::optional<WireError> ParseOpMsg(std::span<const uint8_t> message, OpMsgView& out) {
  if (message.size() < kHeaderSize + kFlagsSize + 1)
    return ProtocolError("OP_MSG is too short to hold flagBits and a section");
  out.flags = PeekOpMsgFlags(message);
  uint32_t required = out.flags & msg_flags::kRequiredMask;
  if (required & ~msg_flags::kKnownRequired)
    return ProtocolError("OP_MSG has unknown required flag bits set");

  std::span<const uint8_t> sections = message.subspan(kHeaderSize + kFlagsSize);
  if (out.checksum_present()) {
    if (sections.size() < kChecksumSize + 1)
      return ProtocolError("OP_MSG is too short to hold its checksum");
    sections = sections.first(sections.size() - kChecksumSize);
    uint32_t declared = LoadUint32(message.data() + message.size() - kChecksumSize);
    uint32_t actual = Crc32c(message.first(message.size() - kChecksumSize));
    if (declared != actual) return ProtocolError("OP_MSG checksum mismatch");
  }

  bool have_body = false;
  while (!sections.empty()) {
    uint8_t kind = sections[0];
    sections = sections.subspan(1);
    size_t used = 0;
    if (kind == 0) {
      if (have_body) return ProtocolError("OP_MSG has more than one kind-0 section");
      if (auto error = ParseDocument(sections, used, out.body)) return error;
      have_body = true;
    } else if (kind == 1) {
      DocumentSequence sequence;
      if (auto error = ParseSequence(sections, used, sequence)) return error;
      out.sequences.push_back(std::move(sequence));
    } else {
      return ProtocolError("OP_MSG has an unknown section kind " + std::to_string(kind));
    }
    sections = sections.subspan(used);
  }
  if (!have_body) return ProtocolError("OP_MSG has no kind-0 body section");
  return std::nullopt;
}

std::vector<uint8_t> EncodeOpMsg(int32_t request_id, int32_t response_to, uint32_t flags,
                                 std::span<const uint8_t> body, bool with_checksum) {
  flags &= ~msg_flags::kChecksumPresent;
  if (with_checksum) flags |= msg_flags::kChecksumPresent;
  size_t size = kHeaderSize + kFlagsSize + 1 + body.size() + (with_checksum ? kChecksumSize : 0);
  std::vector<uint8_t> out(size);
  WriteHeader(out.data(), {static_cast<int32_t>(size), request_id, response_to,
                           static_cast<int32_t>(OpCode::kMsg)});
  StoreUint32(out.data() + kHeaderSize, flags);
  out[kHeaderSize + kFlagsSize] = 0;
  std::memcpy(out.data() + kHeaderSize + kFlagsSize + 1, body.data(), body.size());
  if (with_checksum) {
    uint32_t crc = Crc32c(std::span<const uint8_t>(out).first(size - kChecksumSize));
    StoreUint32(out.data() + size - kChecksumSize, crc);
  }
  return out;
}

std::vector<uint8_t> EncodeOpMsgWithSequence(int32_t request_id, uint32_t flags,
                                             std::span<const uint8_t> body,
                                             std::string_view sequence_id,
                                             std::span<const std::span<const uint8_t>> documents) {
  flags &= ~msg_flags::kChecksumPresent;
  size_t size = kHeaderSize + kFlagsSize + 1 + body.size();
  size_t sequence_size = 0;
  if (!sequence_id.empty()) {
    sequence_size = 4 + sequence_id.size() + 1;
    for (const auto& doc : documents) sequence_size += doc.size();
    size += 1 + sequence_size;
  }
  std::vector<uint8_t> out(size);
  WriteHeader(out.data(), {static_cast<int32_t>(size), request_id, 0,
                           static_cast<int32_t>(OpCode::kMsg)});
  uint8_t* p = out.data() + kHeaderSize;
  StoreUint32(p, flags);
  p += kFlagsSize;
  *p++ = 0;
  std::memcpy(p, body.data(), body.size());
  p += body.size();
  if (!sequence_id.empty()) {
    *p++ = 1;
    StoreInt32(p, static_cast<int32_t>(sequence_size));
    p += 4;
    std::memcpy(p, sequence_id.data(), sequence_id.size());
    p += sequence_id.size();
    *p++ = 0;
    for (const auto& doc : documents) {
      std::memcpy(p, doc.data(), doc.size());
      p += doc.size();
    }
  }
  return out;
}

}  // namespace remold::wire
