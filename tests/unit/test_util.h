// Small helpers shared by the codec unit tests: BSON built with libbson,
// wire messages assembled byte by byte, and a read-only view to inspect
// the documents the codec produces.
#pragma once

#include <bson/bson.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "proxy/wire/crc32c.h"
#include "proxy/wire/request.h"
#include "proxy/wire/wire_format.h"

namespace remold::testing {

using Bytes = std::vector<uint8_t>;

// Takes ownership of `doc` (from BCON_NEW / bson_new) and returns its bytes.
inline Bytes Doc(bson_t* doc) {
  const uint8_t* data = bson_get_data(doc);
  Bytes bytes(data, data + doc->len);
  bson_destroy(doc);
  return bytes;
}

inline Bytes EmptyDoc() { return Doc(bson_new()); }

// Extended JSON of a document, for readable assertion messages.
inline std::string Json(std::span<const uint8_t> doc) {
  bson_t b;
  if (!bson_init_static(&b, doc.data(), doc.size())) return "<invalid BSON>";
  size_t length = 0;
  char* json = bson_as_relaxed_extended_json(&b, &length);
  if (!json) return "<unprintable BSON>";
  std::string out(json, length);
  bson_free(json);
  return out;
}

// Read access to one top-level field of a document.
class DocView {
 public:
  explicit DocView(std::span<const uint8_t> doc) : ok_(bson_init_static(&doc_, doc.data(), doc.size())) {}
  DocView(const DocView&) = delete;
  DocView& operator=(const DocView&) = delete;

  bool valid() const { return ok_; }
  bool Has(const char* key) const {
    bson_iter_t it;
    return ok_ && bson_iter_init_find(&it, &doc_, key);
  }
  std::optional<bson_type_t> Type(const char* key) const {
    bson_iter_t it;
    if (!Find(key, it)) return std::nullopt;
    return bson_iter_type(&it);
  }
  std::optional<std::string> Utf8(const char* key) const {
    bson_iter_t it;
    if (!Find(key, it) || !BSON_ITER_HOLDS_UTF8(&it)) return std::nullopt;
    uint32_t length = 0;
    const char* s = bson_iter_utf8(&it, &length);
    return std::string(s, length);
  }
  std::optional<int32_t> Int32(const char* key) const {
    bson_iter_t it;
    if (!Find(key, it) || !BSON_ITER_HOLDS_INT32(&it)) return std::nullopt;
    return bson_iter_int32(&it);
  }
  std::optional<double> Double(const char* key) const {
    bson_iter_t it;
    if (!Find(key, it) || !BSON_ITER_HOLDS_DOUBLE(&it)) return std::nullopt;
    return bson_iter_double(&it);
  }
  std::optional<bool> Bool(const char* key) const {
    bson_iter_t it;
    if (!Find(key, it) || !BSON_ITER_HOLDS_BOOL(&it)) return std::nullopt;
    return bson_iter_bool(&it);
  }
  // The raw bytes of an embedded document or array value.
  std::optional<Bytes> Sub(const char* key) const {
    bson_iter_t it;
    if (!Find(key, it) || !(BSON_ITER_HOLDS_DOCUMENT(&it) || BSON_ITER_HOLDS_ARRAY(&it)))
      return std::nullopt;
    uint32_t length = 0;
    const uint8_t* data = nullptr;
    if (BSON_ITER_HOLDS_DOCUMENT(&it)) bson_iter_document(&it, &length, &data);
    else bson_iter_array(&it, &length, &data);
    return Bytes(data, data + length);
  }
  // The string elements of an array value, in order (nullopt if not an array).
  std::optional<std::vector<std::string>> StringArray(const char* key) const {
    bson_iter_t it, child;
    if (!Find(key, it) || !BSON_ITER_HOLDS_ARRAY(&it) || !bson_iter_recurse(&it, &child))
      return std::nullopt;
    std::vector<std::string> out;
    while (bson_iter_next(&child)) {
      if (!BSON_ITER_HOLDS_UTF8(&child)) return std::nullopt;
      out.emplace_back(bson_iter_utf8(&child, nullptr));
    }
    return out;
  }
  std::vector<std::string> Keys() const {
    std::vector<std::string> keys;
    bson_iter_t it;
    if (ok_ && bson_iter_init(&it, &doc_))
      while (bson_iter_next(&it)) keys.emplace_back(bson_iter_key(&it));
    return keys;
  }

 private:
  bool Find(const char* key, bson_iter_t& it) const {
    return ok_ && bson_iter_init_find(&it, &doc_, key);
  }
  bson_t doc_{};
  bool ok_;
};

inline void AppendInt32(Bytes& out, int32_t v) {
  uint8_t b[4];
  wire::StoreInt32(b, v);
  out.insert(out.end(), b, b + 4);
}
inline void AppendUint32(Bytes& out, uint32_t v) {
  uint8_t b[4];
  wire::StoreUint32(b, v);
  out.insert(out.end(), b, b + 4);
}
inline void AppendInt64(Bytes& out, int64_t v) {
  uint8_t b[8];
  std::memcpy(b, &v, 8);
  out.insert(out.end(), b, b + 8);
}
inline void AppendBytes(Bytes& out, std::span<const uint8_t> bytes) {
  out.insert(out.end(), bytes.begin(), bytes.end());
}
inline void AppendCString(Bytes& out, std::string_view s) {
  out.insert(out.end(), s.begin(), s.end());
  out.push_back(0);
}

// A 16-byte header with a placeholder length; FinishMessage fills it in.
inline Bytes StartMessage(int32_t request_id, int32_t response_to, wire::OpCode op) {
  Bytes out;
  AppendInt32(out, 0);
  AppendInt32(out, request_id);
  AppendInt32(out, response_to);
  AppendInt32(out, static_cast<int32_t>(op));
  return out;
}
inline void FinishMessage(Bytes& message) {
  wire::StoreInt32(message.data(), static_cast<int32_t>(message.size()));
}

// An OP_MSG assembled section by section, so tests can also build messages
// the codec's own encoder never would (duplicate bodies, odd kinds, ...).
class OpMsgBuilder {
 public:
  explicit OpMsgBuilder(uint32_t flags = 0, int32_t request_id = 1, int32_t response_to = 0)
      : message_(StartMessage(request_id, response_to, wire::OpCode::kMsg)) {
    AppendUint32(message_, flags);
  }
  OpMsgBuilder& Body(std::span<const uint8_t> doc) {
    message_.push_back(0);
    AppendBytes(message_, doc);
    return *this;
  }
  OpMsgBuilder& Sequence(std::string_view identifier, const std::vector<Bytes>& docs) {
    size_t size = 4 + identifier.size() + 1;
    for (const Bytes& d : docs) size += d.size();
    message_.push_back(1);
    AppendInt32(message_, static_cast<int32_t>(size));
    AppendCString(message_, identifier);
    for (const Bytes& d : docs) AppendBytes(message_, d);
    return *this;
  }
  OpMsgBuilder& Raw(std::span<const uint8_t> bytes) {
    AppendBytes(message_, bytes);
    return *this;
  }
  // Appends a CRC-32C over everything so far (the caller sets the flag bit;
  // crc32c_test pins Crc32c itself to published vectors).
  Bytes BuildWithChecksum() const {
    Bytes out = message_;
    wire::StoreInt32(out.data(), static_cast<int32_t>(out.size() + 4));
    AppendUint32(out, wire::Crc32c(out));
    return out;
  }
  Bytes Build() const {
    Bytes out = message_;
    FinishMessage(out);
    return out;
  }

 private:
  Bytes message_;
};

inline Bytes OpQueryMessage(int32_t request_id, std::string_view collection,
                            std::span<const uint8_t> query, int32_t flags = 0,
                            int32_t skip = 0, int32_t to_return = -1,
                            std::optional<Bytes> fields = std::nullopt) {
  Bytes out = StartMessage(request_id, 0, wire::OpCode::kQuery);
  AppendInt32(out, flags);
  AppendCString(out, collection);
  AppendInt32(out, skip);
  AppendInt32(out, to_return);
  AppendBytes(out, query);
  if (fields) AppendBytes(out, *fields);
  FinishMessage(out);
  return out;
}

inline Bytes OpReplyMessage(int32_t request_id, int32_t response_to, int32_t flags,
                            int64_t cursor_id, int32_t starting_from,
                            const std::vector<Bytes>& docs,
                            std::optional<int32_t> number_returned = std::nullopt) {
  Bytes out = StartMessage(request_id, response_to, wire::OpCode::kReply);
  AppendInt32(out, flags);
  AppendInt64(out, cursor_id);
  AppendInt32(out, starting_from);
  AppendInt32(out, number_returned.value_or(static_cast<int32_t>(docs.size())));
  for (const Bytes& d : docs) AppendBytes(out, d);
  FinishMessage(out);
  return out;
}

inline Bytes ToBytes(std::span<const uint8_t> s) { return Bytes(s.begin(), s.end()); }

// {"": {"": ... {} ...}} with `depth` levels of embedded documents: each
// level is int32 length, type 0x03, empty key, the child, terminating NUL.
inline Bytes NestedDocument(size_t depth) {
  const size_t size = 5 + 7 * depth;
  Bytes doc(size, 0);
  size_t length = size;
  for (size_t level = 0; level < depth; ++level, length -= 7) {
    uint8_t* at = doc.data() + 6 * level;
    wire::StoreInt32(at, static_cast<int32_t>(length));
    at[4] = 0x03;  // embedded document, key "" (the NUL at at[5])
  }
  wire::StoreInt32(doc.data() + 6 * depth, 5);
  return doc;
}

// {s: <string bytes>, n: int32 5} with the string stored byte for byte.
inline Bytes DocWithRawString(std::string_view s) {
  bson_t* doc = bson_new();
  bson_append_utf8(doc, "s", -1, s.data(), static_cast<int>(s.size()));
  BSON_APPEND_INT32(doc, "n", 5);
  return Doc(doc);
}

// A decoded OP_MSG request whose command document is `body` (which must
// outlive it), as DecodeRequest would leave it for routing.
inline wire::Request MsgRequest(std::span<const uint8_t> body, std::string command) {
  wire::Request request;
  request.header.op_code = static_cast<int32_t>(wire::OpCode::kMsg);
  request.command = std::move(command);
  request.command_document = body;
  return request;
}

}  // namespace remold::testing
