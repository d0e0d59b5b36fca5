#include "proxy/wire/handshake_edit.h"

#include <bson/bson.h>

#include <algorithm>

#include "proxy/wire/op_msg.h"
#include "proxy/wire/op_query.h"
#include "proxy/wire/wire_format.h"

namespace remold::wire {
namespace {

// `command` edited; inside a legacy {$query: ...} wrapper, the wrapped
// command is.
std::optional<std::vector<uint8_t>> EditCommand(std::span<const uint8_t> command, const HandshakeEdit& edit) {
  bson_t in;
  bson_iter_t iter;
  if (!bson_init_static(&in, command.data(), command.size()) || !bson_iter_init(&iter, &in)) return std::nullopt;
  bson_t out = BSON_INITIALIZER;
  bool wrapped = false;
  bool ok = true;
  while (ok && bson_iter_next(&iter)) {
    const std::string_view key = bson_iter_key(&iter);
    if (std::find(edit.drop.begin(), edit.drop.end(), key) != edit.drop.end()) continue;
    if (key == "$query" && BSON_ITER_HOLDS_DOCUMENT(&iter)) {
      uint32_t length = 0;
      const uint8_t* data = nullptr;
      bson_iter_document(&iter, &length, &data);
      std::optional<std::vector<uint8_t>> inner = EditCommand({data, length}, edit);
      bson_t inner_doc;
      ok = inner && bson_init_static(&inner_doc, inner->data(), inner->size());
      if (ok) BSON_APPEND_DOCUMENT(&out, "$query", &inner_doc);
      wrapped = true;
      continue;
    }
    bson_append_iter(&out, nullptr, 0, &iter);
  }
  if (ok && !wrapped && !edit.append.empty()) {
    bson_t appended;
    bson_iter_t element;
    ok = bson_init_static(&appended, edit.append.data(), edit.append.size()) && bson_iter_init(&element, &appended);
    while (ok && bson_iter_next(&element)) bson_append_iter(&out, nullptr, 0, &element);
  }
  std::optional<std::vector<uint8_t>> result;
  if (ok) {
    const uint8_t* data = bson_get_data(&out);
    result.emplace(data, data + out.len);
  }
  bson_destroy(&out);
  return result;
}

}  // namespace

std::optional<std::vector<uint8_t>> EditHandshake(std::span<const uint8_t> message, const HandshakeEdit& edit) {
  const MessageHeader header = ReadHeader(message);
  if (header.op_code == static_cast<int32_t>(OpCode::kMsg)) {
    OpMsgView view;
    if (ParseOpMsg(message, view) || !view.sequences.empty()) return std::nullopt;
    std::optional<std::vector<uint8_t>> body = EditCommand(view.body, edit);
    if (!body) return std::nullopt;
    return EncodeOpMsg(header.request_id, header.response_to, view.flags & ~edit.clear_flags, *body,
                       view.checksum_present());
  }
  if (header.op_code == static_cast<int32_t>(OpCode::kQuery)) {
    OpQueryView view;
    if (ParseOpQuery(message, view)) return std::nullopt;
    std::optional<std::vector<uint8_t>> query = EditCommand(view.query, edit);
    if (!query) return std::nullopt;
    // The query document spliced in: what precedes and follows it is kept.
    const size_t start = static_cast<size_t>(view.query.data() - message.data());
    std::vector<uint8_t> out(message.begin(), message.begin() + static_cast<std::ptrdiff_t>(start));
    out.insert(out.end(), query->begin(), query->end());
    out.insert(out.end(), message.begin() + static_cast<std::ptrdiff_t>(start + view.query.size()), message.end());
    StoreInt32(out.data(), static_cast<int32_t>(out.size()));
    return out;
  }
  return std::nullopt;
}

}  // namespace remold::wire
