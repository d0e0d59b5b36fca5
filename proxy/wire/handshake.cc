#include "proxy/wire/handshake.h"

#include <bson/bson.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <string>

#include "proxy/wire/op_msg.h"
#include "proxy/wire/op_query.h"
#include "proxy/wire/wire_format.h"

namespace remold::wire {
namespace {

// ok: 1 (any number type), or no "ok" at all (legacy replies omit it on
// success). A failed handshake says ok: 0.
bool IsOkReply(std::span<const uint8_t> reply) {
  bson_t doc;
  bson_iter_t ok;
  if (!bson_init_static(&doc, reply.data(), reply.size())) return true;
  if (!bson_iter_init_find(&ok, &doc, "ok")) return true;
  return bson_iter_as_bool(&ok);
}

// Fields that describe the backend's replica set or its own identity.
constexpr std::array<std::string_view, 16> kTopologyFields = {
    "hosts",   "passives", "arbiters",    "setName", "setVersion",  "primary",
    "me",      "secondary", "arbiterOnly", "passive", "hidden",     "tags",
    "electionId", "lastWrite", "isreplicaset", "msg"};

bool IsTopologyField(std::string_view key) {
  return std::find(kTopologyFields.begin(), kTopologyFields.end(), key) != kTopologyFields.end();
}

}  // namespace

bool IsHandshakeCommand(std::string_view command) {
  return command == "hello" || command == "isMaster" || command == "ismaster";
}

std::vector<Compressor> OfferedCompressors(std::span<const uint8_t> hello_command) {
  std::vector<Compressor> offered;
  bson_t command;
  bson_iter_t iter, child;
  if (!bson_init_static(&command, hello_command.data(), hello_command.size()) ||
      !bson_iter_init_find(&iter, &command, "compression") || !BSON_ITER_HOLDS_ARRAY(&iter) ||
      !bson_iter_recurse(&iter, &child))
    return offered;
  while (bson_iter_next(&child)) {
    if (!BSON_ITER_HOLDS_UTF8(&child)) continue;
    std::optional<Compressor> c = CompressorFromName(bson_iter_utf8(&child, nullptr));
    if (c && *c != Compressor::kNoop &&
        std::find(offered.begin(), offered.end(), *c) == offered.end())
      offered.push_back(*c);
  }
  return offered;
}

std::vector<uint8_t> RewriteHandshakeReply(std::span<const uint8_t> reply,
                                           std::span<const Compressor> negotiated,
                                           int32_t max_message_size) {
  max_message_size = std::min(max_message_size, kMaxMessageSize);
  if (!IsOkReply(reply)) return {reply.begin(), reply.end()};
  bson_t in;
  bson_t out = BSON_INITIALIZER;
  bson_iter_t iter;
  bool has_max_message_size = false;
  if (bson_init_static(&in, reply.data(), reply.size()) && bson_iter_init(&iter, &in)) {
    while (bson_iter_next(&iter)) {
      std::string_view key = bson_iter_key(&iter);
      if (IsTopologyField(key) || key == "compression") continue;
      if (key == "maxMessageSizeBytes") has_max_message_size = true;
      // A mongos is always writable: the member that answered may be a
      // secondary while the set has no primary.
      if (key == "ismaster" || key == "isWritablePrimary") {
        bson_append_bool(&out, key.data(), static_cast<int>(key.size()), true);
        continue;
      }
      if (key == "maxMessageSizeBytes" && BSON_ITER_HOLDS_NUMBER(&iter) &&
          bson_iter_as_int64(&iter) > max_message_size) {
        BSON_APPEND_INT32(&out, "maxMessageSizeBytes", max_message_size);
        continue;
      }
      bson_append_iter(&out, nullptr, 0, &iter);
    }
  }
  if (!has_max_message_size && max_message_size < kMaxMessageSize)
    BSON_APPEND_INT32(&out, "maxMessageSizeBytes", max_message_size);
  BSON_APPEND_UTF8(&out, "msg", "isdbgrid");
  if (!negotiated.empty()) {
    bson_t array;
    BSON_APPEND_ARRAY_BEGIN(&out, "compression", &array);
    for (size_t i = 0; i < negotiated.size(); ++i) {
      std::string index = std::to_string(i);
      std::string_view name = CompressorName(negotiated[i]);
      bson_append_utf8(&array, index.c_str(), -1, name.data(), static_cast<int>(name.size()));
    }
    bson_append_array_end(&out, &array);
  }
  const uint8_t* data = bson_get_data(&out);
  std::vector<uint8_t> result(data, data + out.len);
  bson_destroy(&out);
  return result;
}

std::optional<std::span<const uint8_t>> HandshakeReplyDocument(std::span<const uint8_t> message) {
  MessageHeader header = ReadHeader(message);
  if (header.op_code == static_cast<int32_t>(OpCode::kMsg)) {
    OpMsgView view;
    if (ParseOpMsg(message, view)) return std::nullopt;
    return view.body;
  }
  if (header.op_code == static_cast<int32_t>(OpCode::kReply)) {
    OpReplyView view;
    if (ParseOpReply(message, view) || view.documents.size() != 1) return std::nullopt;
    return view.documents[0];
  }
  return std::nullopt;
}

bool RewriteHandshakeMessage(std::vector<uint8_t>& message,
                             std::span<const Compressor> negotiated,
                             int32_t max_message_size) {
  MessageHeader header = ReadHeader(message);
  if (header.op_code == static_cast<int32_t>(OpCode::kMsg)) {
    OpMsgView view;
    if (ParseOpMsg(message, view) || !view.sequences.empty()) return false;
    std::vector<uint8_t> body = RewriteHandshakeReply(view.body, negotiated, max_message_size);
    message = EncodeOpMsg(header.request_id, header.response_to, view.flags, body,
                          view.checksum_present());
    return true;
  }
  if (header.op_code == static_cast<int32_t>(OpCode::kReply)) {
    OpReplyView view;
    if (ParseOpReply(message, view) || view.documents.size() != 1) return false;
    std::vector<uint8_t> body = RewriteHandshakeReply(view.documents[0], negotiated, max_message_size);
    view.documents[0] = body;
    message = EncodeOpReply(header.request_id, header.response_to, view);
    return true;
  }
  return false;
}

}  // namespace remold::wire
