#include "proxy/bson_check.h"

#include <bson/bson.h>

#include <string>

#include "proxy/byte_io.h"
#include "proxy/wire_format.h"

namespace remold::wire {

std::optional<int32_t> DocumentLength(std::span<const uint8_t> bytes) {
  if (bytes.size() < 5) return std::nullopt;
  int32_t length = LoadInt32(bytes.data());
  if (length < 5 || static_cast<size_t>(length) > bytes.size()) return std::nullopt;
  return length;
}

std::optional<WireError> ValidateDocument(std::span<const uint8_t> doc) {
  bson_t b;
  if (doc.size() < 5 || !bson_init_static(&b, doc.data(), doc.size()))
    return InvalidBson("document length prefix or terminator is invalid");
  if (doc.size() > static_cast<size_t>(kMaxBsonObjectSize) + 16 * 1024)
    return WireError{error_codes::kBSONObjectTooLarge, "BSONObjectTooLarge",
                     "document exceeds the maximum BSON size", false};
  bson_error_t error;
  if (!bson_validate_with_error(&b, BSON_VALIDATE_NONE, &error))
    return InvalidBson(std::string("invalid BSON: ") + error.message);
  return std::nullopt;
}

std::string_view FirstKey(std::span<const uint8_t> doc) {
  // Layout: int32 length, then elements: type byte, cstring key, value.
  if (doc.size() < 6 || doc[4] == 0) return {};
  const char* key = reinterpret_cast<const char*>(doc.data() + 5);
  size_t max = doc.size() - 5;
  size_t len = strnlen(key, max);
  if (len == max) return {};
  return {key, len};
}

}  // namespace remold::wire
