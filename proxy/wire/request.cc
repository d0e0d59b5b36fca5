#include "proxy/wire/request.h"

#include <bson/bson.h>

#include <string>

#include "proxy/wire/bson_check.h"
#include "proxy/wire/handshake.h"
#include "proxy/wire/op_compressed.h"
#include "proxy/wire/op_msg.h"
#include "proxy/wire/op_query.h"

namespace remold::wire {
namespace {

std::optional<WireError> DecodeOpMsg(std::span<const uint8_t> message, Request& out) {
  OpMsgView view;
  std::optional<WireError> error = ParseOpMsg(message, view);
  out.more_to_come = view.more_to_come();  // known even when the rest is bad
  if (error) return error;
  out.command_document = view.body;
  out.command = std::string(FirstKey(view.body));
  out.sequences = std::move(view.sequences);
  if (out.command.empty())
    return WireError{error_codes::kFailedToParse,
                     "OP_MSG body is an empty document: no command name", false};
  return std::nullopt;
}

std::optional<WireError> DecodeOpQuery(std::span<const uint8_t> message, Request& out) {
  OpQueryView view;
  if (auto error = ParseOpQuery(message, view)) return error;
  out.command_document = view.query;
  std::string_view first = FirstKey(view.query);
  // A legacy command may be wrapped as {$query: {...}, $readPreference: ...}.
  if (first == "$query" || first == "query") {
    bson_t query;
    bson_iter_t iter;
    if (bson_init_static(&query, view.query.data(), view.query.size()) &&
        bson_iter_init_find(&iter, &query, std::string(first).c_str()) &&
        BSON_ITER_HOLDS_DOCUMENT(&iter)) {
      uint32_t length = 0;
      const uint8_t* data = nullptr;
      bson_iter_document(&iter, &length, &data);
      out.command_document = {data, length};
      first = FirstKey(out.command_document);
    }
  }
  out.command = std::string(first);
  if (out.command.empty())
    return WireError{error_codes::kFailedToParse,
                     "OP_QUERY command is an empty document: no command name", false};
  if (!view.is_command())
    return WireError{error_codes::kUnsupportedOpQueryCommand,
                     "OP_QUERY is supported only for commands on <db>.$cmd; use OP_MSG", false};
  return std::nullopt;
}

}  // namespace

std::optional<WireError> DecodeRequest(std::vector<uint8_t>& message, Request& out) {
  if (message.size() < static_cast<size_t>(kHeaderSize))
    return FatalProtocolError("message is shorter than its header");
  out.header = ReadHeader(message);
  if (out.header.op_code == static_cast<int32_t>(OpCode::kCompressed)) {
    std::vector<uint8_t> original;
    Compressor used = Compressor::kNoop;
    if (auto error = DecompressMessage(message, original, used)) return error;
    message.swap(original);
    out.header = ReadHeader(message);
    out.compressor = used;
  }

  std::optional<WireError> error;
  switch (static_cast<OpCode>(out.header.op_code)) {
    case OpCode::kMsg:
      error = DecodeOpMsg(message, out);
      break;
    case OpCode::kQuery:
      error = DecodeOpQuery(message, out);
      break;
    default:
      // Legacy opcodes (OP_INSERT, OP_GET_MORE, ...) were removed from
      // MongoDB; like mongod, hang up rather than guess at a reply.
      return FatalProtocolError("unsupported opcode " + std::to_string(out.header.op_code));
  }
  if (error) return error;

  out.is_handshake = IsHandshakeCommand(out.command);
  if (out.is_handshake) out.offered_compressors = OfferedCompressors(out.command_document);
  return std::nullopt;
}

}  // namespace remold::wire
