#include "proxy/reply_errors.h"

#include <cstring>

#include "proxy/wire_format.h"

namespace remold::wire {

std::optional<ReplyErrors> ScanReplyErrors(std::span<const uint8_t> document) {
  // A hand-rolled walk of the top-level elements: this runs for every reply
  // relayed, and a reply has a handful of top-level fields.
  if (document.size() < 5) return std::nullopt;
  const uint8_t* p = document.data();
  const int32_t declared = LoadInt32(p);
  if (declared < 5 || static_cast<size_t>(declared) > document.size()) return std::nullopt;
  const size_t end = static_cast<size_t>(declared) - 1;  // the terminating NUL
  ReplyErrors found;
  for (size_t at = 4; at < end;) {
    const uint8_t type = p[at++];
    const char* key = reinterpret_cast<const char*>(p + at);
    const size_t key_length = strnlen(key, end - at);
    if (key_length == end - at) return std::nullopt;
    at += key_length + 1;
    const uint8_t* value = p + at;
    const size_t left = end - at;
    size_t size;
    switch (type) {
      case 0x01: case 0x09: case 0x11: case 0x12: size = 8; break;  // double, date, timestamp, int64
      case 0x10: size = 4; break;                                   // int32
      case 0x08: size = 1; break;                                   // bool
      case 0x07: size = 12; break;                                  // ObjectId
      case 0x13: size = 16; break;                                  // decimal128
      case 0x06: case 0x0A: case 0x7F: case 0xFF: size = 0; break;  // undefined, null, max/min key
      case 0x02: case 0x0D: case 0x0E: case 0x0C:                   // string, code, symbol, dbpointer
        if (left < 4 || LoadInt32(value) < 1) return std::nullopt;
        size = 4 + static_cast<size_t>(LoadInt32(value)) + (type == 0x0C ? 12 : 0);
        break;
      case 0x03: case 0x04: case 0x0F:  // document, array, code with scope
        if (left < 4 || LoadInt32(value) < 5) return std::nullopt;
        size = static_cast<size_t>(LoadInt32(value));
        break;
      case 0x05:  // binary
        if (left < 4 || LoadInt32(value) < 0) return std::nullopt;
        size = 5 + static_cast<size_t>(LoadInt32(value));
        break;
      case 0x0B: {  // regex: two C strings
        const size_t pattern = strnlen(reinterpret_cast<const char*>(value), left);
        if (pattern == left) return std::nullopt;
        const size_t options = strnlen(reinterpret_cast<const char*>(value) + pattern + 1, left - pattern - 1);
        size = pattern + 1 + options + 1;
        break;
      }
      default: return std::nullopt;
    }
    if (size > left) return std::nullopt;
    if (key_length == 2 && key[0] == 'o' && key[1] == 'k') {
      switch (type) {
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
    } else if (key_length == 4 && std::memcmp(key, "code", 4) == 0) {
      if (type == 0x10) {
        found.code = LoadInt32(value);
      } else if (type == 0x12) {
        int64_t v;
        std::memcpy(&v, value, 8);
        found.code = static_cast<int32_t>(v);
      } else if (type == 0x01) {
        double d;
        std::memcpy(&d, value, 8);
        found.code = static_cast<int32_t>(d);
      }
    } else if (type == 0x04 && key_length == 11 && std::memcmp(key, "writeErrors", 11) == 0) {
      found.write_errors = {value, size};
    } else if (type == 0x03 && key_length == 17 && std::memcmp(key, "writeConcernError", 17) == 0) {
      found.write_concern_error = {value, size};
    }
    at += size;
  }
  return found;
}

}  // namespace remold::wire
