#include "proxy/wire/reply_errors.h"

#include <cstring>

#include "common/bson_walk.h"
#include "proxy/wire/byte_io.h"

namespace remold::wire {

std::optional<ReplyErrors> ScanReplyErrors(std::span<const uint8_t> document) {
  ReplyErrors found;
  const bool well_formed = WalkTopLevel(document, [&found](const BsonElement& element) {
    const uint8_t* value = element.value.data();
    if (element.key == "ok") {
      switch (element.type) {
        case 0x01: {
          double d;
          std::memcpy(&d, value, 8);
          found.failed = d != 1.0;
          break;
        }
        case 0x10: found.failed = LoadInt32(value) != 1; break;
        case 0x12: {
          int64_t v;
          std::memcpy(&v, value, 8);
          found.failed = v != 1;
          break;
        }
        case 0x08: found.failed = value[0] != 1; break;
        default: found.failed = true;
      }
    } else if (element.key == "code") {
      if (element.type == 0x10) {
        found.code = LoadInt32(value);
      } else if (element.type == 0x12) {
        int64_t v;
        std::memcpy(&v, value, 8);
        found.code = static_cast<int32_t>(v);
      } else if (element.type == 0x01) {
        double d;
        std::memcpy(&d, value, 8);
        found.code = static_cast<int32_t>(d);
      }
    } else if (element.type == 0x04 && element.key == "writeErrors") {
      found.write_errors = element.value;
    } else if (element.type == 0x03 && element.key == "writeConcernError") {
      found.write_concern_error = element.value;
    }
    return true;
  });
  if (!well_formed) return std::nullopt;
  return found;
}

}  // namespace remold::wire
