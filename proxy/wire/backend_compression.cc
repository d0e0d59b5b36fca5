#include "proxy/wire/backend_compression.h"

#include <bson/bson.h>

#include <algorithm>
#include <array>
#include <string>

#include "proxy/wire/handshake.h"
#include "proxy/wire/op_msg.h"
#include "proxy/wire/op_query.h"
#include "proxy/wire/wire_format.h"

namespace remold::wire {
namespace {

// The OP_COMPRESSED specification's list of commands never compressed.
constexpr std::array<std::string_view, 11> kNeverCompressed = {
    "hello",      "isMaster",   "ismaster",        "saslStart",      "saslContinue", "getnonce",
    "authenticate", "createUser", "updateUser", "copydbSaslStart", "copydbgetnonce"};

void AppendOffer(bson_t* out, std::span<const Compressor> offer) {
  bson_t array;
  BSON_APPEND_ARRAY_BEGIN(out, "compression", &array);
  for (size_t i = 0; i < offer.size(); ++i) {
    const std::string index = std::to_string(i);
    const std::string_view name = CompressorName(offer[i]);
    bson_append_utf8(&array, index.c_str(), -1, name.data(), static_cast<int>(name.size()));
  }
  bson_append_array_end(out, &array);
}

// `command` with `compression` replaced by `offer` (added after the
// command's other fields when it had none). Inside a legacy {$query: ...}
// wrapper, the wrapped command's.
std::optional<std::vector<uint8_t>> OfferIn(std::span<const uint8_t> command, std::span<const Compressor> offer) {
  bson_t in;
  bson_iter_t iter;
  if (!bson_init_static(&in, command.data(), command.size()) || !bson_iter_init(&iter, &in)) return std::nullopt;
  bson_t out = BSON_INITIALIZER;
  bool wrapped = false;
  while (bson_iter_next(&iter)) {
    const std::string_view key = bson_iter_key(&iter);
    if (key == "compression") continue;
    if (key == "$query" && BSON_ITER_HOLDS_DOCUMENT(&iter)) {
      uint32_t length = 0;
      const uint8_t* data = nullptr;
      bson_iter_document(&iter, &length, &data);
      std::optional<std::vector<uint8_t>> inner = OfferIn({data, length}, offer);
      bson_t inner_doc;
      if (!inner || !bson_init_static(&inner_doc, inner->data(), inner->size())) {
        bson_destroy(&out);
        return std::nullopt;
      }
      BSON_APPEND_DOCUMENT(&out, "$query", &inner_doc);
      wrapped = true;
      continue;
    }
    bson_append_iter(&out, nullptr, 0, &iter);
  }
  if (!wrapped) AppendOffer(&out, offer);
  const uint8_t* data = bson_get_data(&out);
  std::vector<uint8_t> result(data, data + out.len);
  bson_destroy(&out);
  return result;
}

}  // namespace

bool MayCompress(std::string_view command) {
  return std::find(kNeverCompressed.begin(), kNeverCompressed.end(), command) == kNeverCompressed.end() &&
         command != "copydb";
}

std::optional<std::vector<uint8_t>> WithCompressionOffer(std::span<const uint8_t> message,
                                                         std::span<const Compressor> offer) {
  const MessageHeader header = ReadHeader(message);
  if (header.op_code == static_cast<int32_t>(OpCode::kMsg)) {
    OpMsgView view;
    if (ParseOpMsg(message, view) || !view.sequences.empty()) return std::nullopt;
    std::optional<std::vector<uint8_t>> body = OfferIn(view.body, offer);
    if (!body) return std::nullopt;
    return EncodeOpMsg(header.request_id, header.response_to, view.flags, *body, view.checksum_present());
  }
  if (header.op_code == static_cast<int32_t>(OpCode::kQuery)) {
    OpQueryView view;
    if (ParseOpQuery(message, view)) return std::nullopt;
    std::optional<std::vector<uint8_t>> query = OfferIn(view.query, offer);
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

std::vector<uint8_t> OfferHelloCommand(std::span<const Compressor> offer) {
  bson_t command = BSON_INITIALIZER;
  BSON_APPEND_INT32(&command, "isMaster", 1);
  AppendOffer(&command, offer);
  BSON_APPEND_UTF8(&command, "$db", "admin");
  const uint8_t* data = bson_get_data(&command);
  std::vector<uint8_t> result(data, data + command.len);
  bson_destroy(&command);
  return result;
}

std::optional<Compressor> ChosenCompressor(std::span<const uint8_t> reply_document,
                                           std::span<const Compressor> offer) {
  for (Compressor c : OfferedCompressors(reply_document))
    if (std::find(offer.begin(), offer.end(), c) != offer.end()) return c;
  return std::nullopt;
}

}  // namespace remold::wire
