#include "proxy/wire/op_query.h"

#include <cstring>

#include "proxy/wire/bson_check.h"
#include "proxy/wire/byte_io.h"
#include "proxy/wire/wire_format.h"

namespace remold::wire {
namespace {

// Reads one validated document from the front of `bytes`, advancing it.
std::optional<WireError> TakeDocument(std::span<const uint8_t>& bytes,
                                      std::span<const uint8_t>& doc) {
  std::optional<int32_t> length = DocumentLength(bytes);
  if (!length) return InvalidBson("document length is invalid or exceeds the message");
  doc = bytes.first(static_cast<size_t>(*length));
  if (auto error = ValidateDocument(doc)) return error;
  bytes = bytes.subspan(static_cast<size_t>(*length));
  return std::nullopt;
}

constexpr size_t kReplyFixedSize = 4 + 8 + 4 + 4;

}  // namespace

bool OpQueryView::is_command() const {
  constexpr std::string_view kSuffix = ".$cmd";
  return full_collection_name.size() > kSuffix.size() &&
         full_collection_name.substr(full_collection_name.size() - kSuffix.size()) == kSuffix;
}

std::optional<WireError> ParseOpQuery(std::span<const uint8_t> message, OpQueryView& out) {
  std::span<const uint8_t> rest = message.subspan(kHeaderSize);
  if (rest.size() < 4) return ProtocolError("OP_QUERY is too short");
  out.flags = LoadInt32(rest.data());
  rest = rest.subspan(4);
  const char* name = reinterpret_cast<const char*>(rest.data());
  size_t name_length = strnlen(name, rest.size());
  if (name_length == rest.size())
    return ProtocolError("OP_QUERY fullCollectionName is not NUL-terminated");
  out.full_collection_name = {name, name_length};
  rest = rest.subspan(name_length + 1);
  if (rest.size() < 8) return ProtocolError("OP_QUERY is too short");
  out.number_to_skip = LoadInt32(rest.data());
  out.number_to_return = LoadInt32(rest.data() + 4);
  rest = rest.subspan(8);
  if (auto error = TakeDocument(rest, out.query)) return error;
  if (!rest.empty()) {
    if (auto error = TakeDocument(rest, out.return_fields_selector)) return error;
  }
  if (!rest.empty()) return ProtocolError("OP_QUERY has trailing bytes");
  return std::nullopt;
}

std::optional<WireError> ParseOpReply(std::span<const uint8_t> message, OpReplyView& out) {
  std::span<const uint8_t> rest = message.subspan(kHeaderSize);
  if (rest.size() < kReplyFixedSize) return ProtocolError("OP_REPLY is too short");
  out.response_flags = LoadInt32(rest.data());
  std::memcpy(&out.cursor_id, rest.data() + 4, 8);
  out.starting_from = LoadInt32(rest.data() + 12);
  int32_t number_returned = LoadInt32(rest.data() + 16);
  rest = rest.subspan(kReplyFixedSize);
  for (int32_t i = 0; i < number_returned; ++i) {
    std::span<const uint8_t> doc;
    if (auto error = TakeDocument(rest, doc)) return error;
    out.documents.push_back(doc);
  }
  if (!rest.empty()) return ProtocolError("OP_REPLY has trailing bytes");
  return std::nullopt;
}

std::vector<uint8_t> EncodeOpReply(int32_t request_id, int32_t response_to,
                                   const OpReplyView& reply) {
  size_t size = kHeaderSize + kReplyFixedSize;
  for (const auto& doc : reply.documents) size += doc.size();
  std::vector<uint8_t> out(size);
  WriteHeader(out.data(), {static_cast<int32_t>(size), request_id, response_to,
                           static_cast<int32_t>(OpCode::kReply)});
  uint8_t* p = out.data() + kHeaderSize;
  StoreInt32(p, reply.response_flags);
  std::memcpy(p + 4, &reply.cursor_id, 8);
  StoreInt32(p + 12, reply.starting_from);
  StoreInt32(p + 16, static_cast<int32_t>(reply.documents.size()));
  p += kReplyFixedSize;
  for (const auto& doc : reply.documents) {
    std::memcpy(p, doc.data(), doc.size());
    p += doc.size();
  }
  return out;
}

}  // namespace remold::wire
