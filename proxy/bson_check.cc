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

namespace {

// Nesting deeper than this is refused (mongod's own default limit is 200),
// which also bounds the recursion below.
constexpr int kMaxNestingDepth = 200;

enum class Walk { kOk, kCorrupt, kTooDeep };

// Every element of `doc`, recursively, with bson_iter_next's bounds checks.
// (bson_validate is not used: it stops silently, reporting success, at the
// first string that is not UTF-8, and it recurses without a depth limit.)
Walk WalkDocument(const uint8_t* data, uint32_t length, int depth) {
  if (depth > kMaxNestingDepth) return Walk::kTooDeep;
  bson_t doc;
  bson_iter_t iter;
  if (!bson_init_static(&doc, data, length) || !bson_iter_init(&iter, &doc)) return Walk::kCorrupt;
  while (bson_iter_next(&iter)) {
    uint32_t child_length = 0;
    const uint8_t* child = nullptr;
    if (BSON_ITER_HOLDS_DOCUMENT(&iter)) bson_iter_document(&iter, &child_length, &child);
    else if (BSON_ITER_HOLDS_ARRAY(&iter)) bson_iter_array(&iter, &child_length, &child);
    else if (BSON_ITER_HOLDS_CODEWSCOPE(&iter)) bson_iter_codewscope(&iter, nullptr, &child_length, &child);
    else continue;
    if (!child) return Walk::kCorrupt;
    if (Walk w = WalkDocument(child, child_length, depth + 1); w != Walk::kOk) return w;
  }
  return iter.err_off == 0 ? Walk::kOk : Walk::kCorrupt;
}

}  // namespace

std::optional<WireError> ValidateDocument(std::span<const uint8_t> doc) {
  bson_t b;
  if (doc.size() < 5 || !bson_init_static(&b, doc.data(), doc.size()))
    return InvalidBson("document length prefix or terminator is invalid");
  if (doc.size() > static_cast<size_t>(kMaxBsonObjectSize) + 16 * 1024)
    return WireError{error_codes::kBSONObjectTooLarge,
                     "document exceeds the maximum BSON size", false};
  switch (WalkDocument(doc.data(), static_cast<uint32_t>(doc.size()), 0)) {
    case Walk::kOk: return std::nullopt;
    case Walk::kTooDeep: return InvalidBson("document nesting exceeds the maximum depth");
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
