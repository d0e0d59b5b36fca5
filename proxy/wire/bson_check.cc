#include "proxy/wire/bson_check.h"

#include <bson/bson.h>

#include <cstring>
#include <string>

#include "proxy/wire/byte_io.h"
#include "proxy/wire/wire_format.h"

namespace remold::wire {

std::optional<int32_t> DocumentLength(std::span<const uint8_t> bytes) {
  if (bytes.size() < 5) return std::nullopt;
  int32_t length = LoadInt32(bytes.data());
  if (length < 5 || static_cast<size_t>(length) > bytes.size()) return std::nullopt;
  return length;
}

namespace {

// Nesting deeper than this is refused (mongod's own default limit is 200),
// which also bounds the recursion below.
constexpr int kMaxNestingDepth = 200;

enum class Walk { kOk, kCorrupt, kTooDeep };

Walk WalkDocument(const uint8_t* data, size_t len, int depth);

// Where the element of `type` whose value starts at `o` ends, or 0 if it is
// corrupt; a nested document (or a code-with-scope's scope) is put in
// `nested`, for the caller to walk. The checks are those of libbson's
// bson_iter_next (1.23), so a document that passes is one every bson_iter
// over it reads to the end.
size_t ElementEnd(const uint8_t* data, size_t len, uint8_t type, size_t o,
                  std::span<const uint8_t>* nested) {
  size_t next = 0;
  switch (type) {
    case BSON_TYPE_DOUBLE:
    case BSON_TYPE_DATE_TIME:
    case BSON_TYPE_TIMESTAMP:
    case BSON_TYPE_INT64:
      next = o + 8;
      break;
    case BSON_TYPE_INT32:
      next = o + 4;
      break;
    case BSON_TYPE_DECIMAL128:
      next = o + 16;
      break;
    case BSON_TYPE_OID:
      next = o + 12;
      break;
    case BSON_TYPE_NULL:
    case BSON_TYPE_UNDEFINED:
    case BSON_TYPE_MINKEY:
    case BSON_TYPE_MAXKEY:
      next = o;
      break;
    case BSON_TYPE_BOOL:
      if (o >= len || data[o] > 1) return 0;
      next = o + 1;
      break;
    case BSON_TYPE_UTF8:
    case BSON_TYPE_CODE:
    case BSON_TYPE_SYMBOL: {  // int32 size (NUL included), bytes, NUL
      if (o + 4 >= len) return 0;
      const size_t l = LoadUint32(data + o);
      if (l == 0 || l > len - (o + 4) || data[o + 4 + l - 1] != 0) return 0;
      next = o + 4 + l;
      break;
    }
    case BSON_TYPE_BINARY: {  // int32 size, subtype, bytes
      if (o + 4 >= len) return 0;
      const size_t l = LoadUint32(data + o);
      if (l >= len - o - 4) return 0;
      // Subtype 2 (old binary) repeats the size, minus its own 4 bytes.
      if (data[o + 4] == BSON_SUBTYPE_BINARY_DEPRECATED &&
          (l < 4 || int64_t{LoadInt32(data + o + 5)} + 4 != static_cast<int64_t>(l)))
        return 0;
      next = o + 5 + l;
      break;
    }
    case BSON_TYPE_DOCUMENT:
    case BSON_TYPE_ARRAY: {
      if (o + 4 >= len) return 0;
      const size_t l = LoadUint32(data + o);
      if (l > len - o) return 0;
      next = o + l;
      *nested = {data + o, l};
      break;
    }
    case BSON_TYPE_REGEX: {  // pattern and options, two cstrings
      const void* pattern_end = std::memchr(data + o, 0, len - o);
      if (!pattern_end) return 0;
      const size_t options = static_cast<const uint8_t*>(pattern_end) - data + 1;
      const void* options_end = options < len ? std::memchr(data + options, 0, len - options) : nullptr;
      if (!options_end) return 0;
      next = static_cast<const uint8_t*>(options_end) - data + 1;
      break;
    }
    case BSON_TYPE_DBPOINTER: {  // string, then a 12-byte ObjectId
      if (o + 4 >= len) return 0;
      const size_t l = LoadUint32(data + o);
      if (l == 0 || l > len - o - 4 || data[o + l + 3] != 0) return 0;
      next = o + 4 + l + 12;
      break;
    }
    case BSON_TYPE_CODEWSCOPE: {  // int32 total, string code, document scope
      if (len < 19 || o + 14 >= len) return 0;
      const size_t total = LoadUint32(data + o);
      if (total < 14 || total >= len - o) return 0;
      next = o + total;
      const size_t code = LoadUint32(data + o + 4);
      if (code == 0 || code >= len - o - 8 || o + 8 + code + 4 >= next) return 0;
      const size_t scope = o + 8 + code;
      const size_t scope_length = LoadUint32(data + scope);
      if (scope + scope_length != next) return 0;
      *nested = {data + scope, scope_length};
      break;
    }
    default:  // EOD inside the document, or a type BSON does not have
      return 0;
  }
  return next < len ? next : 0;
}

// Every element of `doc`, recursively, without libbson's iterator (which
// costs about five times as much per request, measured with callgrind).
// (bson_validate is not used: it stops silently, reporting success, at the
// first string that is not UTF-8, and it recurses without a depth limit.)
Walk WalkDocument(const uint8_t* data, size_t len, int depth) {
  if (depth > kMaxNestingDepth) return Walk::kTooDeep;
  if (len < 5 || LoadUint32(data) != len || data[len - 1] != 0) return Walk::kCorrupt;
  size_t off = 4;
  while (off != len - 1) {  // the document's own NUL
    const uint8_t type = data[off];
    const void* key_end = std::memchr(data + off + 1, 0, len - off - 1);
    const size_t value = static_cast<const uint8_t*>(key_end) - data + 1;  // found: data[len-1] is 0
    std::span<const uint8_t> nested;
    const size_t next = ElementEnd(data, len, type, value, &nested);
    if (next == 0) return Walk::kCorrupt;
    if (nested.data())
      if (Walk w = WalkDocument(nested.data(), nested.size(), depth + 1); w != Walk::kOk) return w;
    off = next;
  }
  return Walk::kOk;
}

}  // namespace

std::optional<WireError> ValidateDocument(std::span<const uint8_t> doc) {
  if (doc.size() < 5 || LoadUint32(doc.data()) != doc.size() || doc.back() != 0)
    return InvalidBson("document length prefix or terminator is invalid");
  if (doc.size() > static_cast<size_t>(kMaxBsonObjectSize) + 16 * 1024)
    return WireError{error_codes::kBSONObjectTooLarge,
                     "document exceeds the maximum BSON size", false};
  switch (WalkDocument(doc.data(), doc.size(), 0)) {
    case Walk::kOk: return std::nullopt;
    case Walk::kTooDeep:  // mongod's own answer to a request nested too deep
      return WireError{error_codes::kOverflow, "BSONObj exceeds maximum nested object depth of 200", false};
    case Walk::kCorrupt: break;
  }
  return InvalidBson("invalid BSON: corrupt BSON");
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
