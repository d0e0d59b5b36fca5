#include "proxy/wire/backend_compression.h"

#include <bson/bson.h>

#include <algorithm>
#include <array>
#include <string>

#include "proxy/wire/handshake.h"
#include "proxy/wire/handshake_edit.h"
#include "proxy/wire/op_msg.h"
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

}  // namespace

bool MayCompress(std::string_view command) {
  return std::find(kNeverCompressed.begin(), kNeverCompressed.end(), command) == kNeverCompressed.end() &&
         command != "copydb";
}

std::optional<std::vector<uint8_t>> WithCompressionOffer(std::span<const uint8_t> message,
                                                         std::span<const Compressor> offer) {
  bson_t offer_doc = BSON_INITIALIZER;
  AppendOffer(&offer_doc, offer);
  static constexpr std::string_view kReplaced[] = {"compression"};
  std::optional<std::vector<uint8_t>> edited =
      EditHandshake(message, {.drop = kReplaced, .append = {bson_get_data(&offer_doc), offer_doc.len}});
  bson_destroy(&offer_doc);
  return edited;
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
