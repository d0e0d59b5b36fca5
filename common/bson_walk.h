// One walk over the top-level elements of a BSON document, without libbson:
// for the few fields read from every request or reply on the hot path
// (reply errors, a request's routing fields, its namespace), where
// libbson's iterator validates more than these reads need. Element sizes
// are checked against the document; nested documents are not looked into.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

namespace remold {
namespace bson_walk_detail {

inline int32_t LoadInt32(const uint8_t* p) {  // BSON int32; little-endian hosts, as proxy/wire/byte_io.h
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace bson_walk_detail

struct BsonElement {
  uint8_t type;                  // the BSON type byte
  std::string_view key;
  std::span<const uint8_t> value;  // the element's value bytes
};

// Calls visit(element) for each top-level element in order until it
// returns false. Returns false when `document` is not well-formed as far
// as the walk reads it.
template <class Visit>
bool WalkTopLevel(std::span<const uint8_t> document, Visit&& visit) {
  using bson_walk_detail::LoadInt32;
  if (document.size() < 5) return false;
  const uint8_t* p = document.data();
  const int32_t declared = LoadInt32(p);
  if (declared < 5 || static_cast<size_t>(declared) > document.size()) return false;
  const size_t end = static_cast<size_t>(declared) - 1;  // the terminating NUL
  for (size_t at = 4; at < end;) {
    const uint8_t type = p[at++];
    const char* key = reinterpret_cast<const char*>(p + at);
    const size_t key_length = strnlen(key, end - at);
    if (key_length == end - at) return false;
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
        if (left < 4 || LoadInt32(value) < 1) return false;
        size = 4 + static_cast<size_t>(LoadInt32(value)) + (type == 0x0C ? 12 : 0);
        break;
      case 0x03: case 0x04: case 0x0F:  // document, array, code with scope
        if (left < 4 || LoadInt32(value) < 5) return false;
        size = static_cast<size_t>(LoadInt32(value));
        break;
      case 0x05:  // binary
        if (left < 4 || LoadInt32(value) < 0) return false;
        size = 5 + static_cast<size_t>(LoadInt32(value));
        break;
      case 0x0B: {  // regex: two C strings
        const size_t pattern = strnlen(reinterpret_cast<const char*>(value), left);
        if (pattern == left) return false;
        const size_t options = strnlen(reinterpret_cast<const char*>(value) + pattern + 1, left - pattern - 1);
        size = pattern + 1 + options + 1;
        break;
      }
      default: return false;
    }
    if (size > left) return false;
    if (!visit(BsonElement{type, std::string_view(key, key_length), {value, size}})) return true;
    at += size;
  }
  return true;
}

}  // namespace remold
