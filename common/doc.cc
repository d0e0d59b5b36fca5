#include "common/doc.h"

#include <algorithm>

#include <cmath>
#include <cstdio>
#include <cstring>

#include "common/bson_walk.h"

namespace remold {

Doc::Doc() { bson_init(&bson_); }
Doc::~Doc() { bson_destroy(&bson_); }

Doc::Doc(const Doc& other) { bson_copy_to(&other.bson_, &bson_); }

Doc& Doc::operator=(const Doc& other) {
  if (this != &other) {
    bson_destroy(&bson_);
    bson_copy_to(&other.bson_, &bson_);
  }
  return *this;
}

Doc::Doc(Doc&& other) noexcept {
  bson_steal(&bson_, &other.bson_);
  bson_init(&other.bson_);
}

Doc& Doc::operator=(Doc&& other) noexcept {
  if (this != &other) {
    bson_destroy(&bson_);
    bson_steal(&bson_, &other.bson_);
    bson_init(&other.bson_);
  }
  return *this;
}

Doc Doc::FromBytes(std::span<const uint8_t> bytes) {
  Doc doc;
  bson_t view;
  if (bson_init_static(&view, bytes.data(), bytes.size())) {
    bson_destroy(&doc.bson_);
    bson_copy_to(&view, &doc.bson_);
  }
  return doc;
}

Doc Doc::FromBson(const bson_t* bson) {
  Doc doc;
  bson_destroy(&doc.bson_);
  bson_copy_to(bson, &doc.bson_);
  return doc;
}

std::optional<Doc> Doc::FromJson(std::string_view json, std::string* error) {
  bson_error_t bson_error;
  Doc doc;
  bson_destroy(&doc.bson_);
  if (!bson_init_from_json(&doc.bson_, json.data(), static_cast<ssize_t>(json.size()),
                           &bson_error)) {
    bson_init(&doc.bson_);
    if (error) *error = bson_error.message;
    return std::nullopt;
  }
  return doc;
}

std::string Doc::ToCanonicalJson() const {
  size_t length = 0;
  char* json = bson_as_canonical_extended_json(&bson_, &length);
  std::string out(json ? json : "", json ? length : 0);
  bson_free(json);
  return out;
}

std::string Doc::ToRelaxedJson() const {
  size_t length = 0;
  char* json = bson_as_relaxed_extended_json(&bson_, &length);
  std::string out(json ? json : "", json ? length : 0);
  bson_free(json);
  return out;
}

bool Doc::operator==(const Doc& other) const { return bson_equal(&bson_, &other.bson_); }

std::string_view FirstKey(const bson_t* doc) {
  bson_iter_t it;
  if (!doc || !bson_iter_init(&it, doc) || !bson_iter_next(&it)) return {};
  return bson_iter_key(&it);
}

std::optional<bson_iter_t> Find(const bson_t* doc, std::string_view key) {
  bson_iter_t iter;
  if (!bson_iter_init(&iter, doc)) return std::nullopt;
  while (bson_iter_next(&iter)) {
    if (key == bson_iter_key(&iter)) return iter;
  }
  return std::nullopt;
}

std::optional<std::string> FindString(const bson_t* doc, std::string_view key) {
  auto iter = Find(doc, key);
  if (!iter || !BSON_ITER_HOLDS_UTF8(&*iter)) return std::nullopt;
  uint32_t length = 0;
  const char* s = bson_iter_utf8(&*iter, &length);
  return std::string(s, length);
}

std::optional<Doc> FindDocument(const bson_t* doc, std::string_view key) {
  auto iter = Find(doc, key);
  if (!iter || !(BSON_ITER_HOLDS_DOCUMENT(&*iter) || BSON_ITER_HOLDS_ARRAY(&*iter)))
    return std::nullopt;
  uint32_t length = 0;
  const uint8_t* data = nullptr;
  if (BSON_ITER_HOLDS_DOCUMENT(&*iter)) bson_iter_document(&*iter, &length, &data);
  else bson_iter_array(&*iter, &length, &data);
  return Doc::FromBytes({data, length});
}

std::optional<int64_t> FindInteger(const bson_t* doc, std::string_view key) {
  auto iter = Find(doc, key);
  if (!iter) return std::nullopt;
  if (BSON_ITER_HOLDS_INT32(&*iter)) return bson_iter_int32(&*iter);
  if (BSON_ITER_HOLDS_INT64(&*iter)) return bson_iter_int64(&*iter);
  if (BSON_ITER_HOLDS_DOUBLE(&*iter)) {
    double d = bson_iter_double(&*iter);
    if (std::trunc(d) == d && std::fabs(d) < 9.0e18) return static_cast<int64_t>(d);
  }
  return std::nullopt;
}

std::optional<bool> FindBool(const bson_t* doc, std::string_view key) {
  auto iter = Find(doc, key);
  if (!iter) return std::nullopt;
  return bson_iter_as_bool(&*iter);
}

std::optional<bson_iter_t> FindPath(const bson_t* doc, std::string_view path) {
  bson_iter_t iter, found;
  if (!bson_iter_init(&iter, doc)) return std::nullopt;
  std::string dotted(path);
  if (!bson_iter_find_descendant(&iter, dotted.c_str(), &found)) return std::nullopt;
  return found;
}

void AppendValue(bson_t* out, std::string_view key, const bson_iter_t& iter) {
  bson_append_iter(out, key.data(), static_cast<int>(key.size()), &iter);
}

void AppendDoc(bson_t* out, std::string_view key, const Doc& doc) {
  bson_append_document(out, key.data(), static_cast<int>(key.size()), doc.get());
}

void AppendArray(bson_t* out, std::string_view key, const std::vector<Doc>& docs) {
  bson_t array;
  bson_append_array_begin(out, key.data(), static_cast<int>(key.size()), &array);
  char index[16];
  for (size_t i = 0; i < docs.size(); ++i) {
    const char* index_key = nullptr;
    size_t length = bson_uint32_to_string(static_cast<uint32_t>(i), &index_key, index, sizeof index);
    bson_append_document(&array, index_key, static_cast<int>(length), docs[i].get());
  }
  bson_append_array_end(out, &array);
}

Doc Stage(std::string_view name, const Doc& spec) {
  Doc stage;
  AppendDoc(stage.mut(), name, spec);
  return stage;
}

Doc Boxed(const bson_iter_t& value) {
  Doc box;
  AppendValue(box.mut(), "v", value);
  return box;
}

bson_iter_t Unboxed(const Doc& box) {
  bson_iter_t it;
  bson_iter_init_find(&it, box.get(), "v");
  return it;
}

void AppendEquals(bson_t* filter, std::string_view key, const bson_iter_t& value) {
  if (!BSON_ITER_HOLDS_DOCUMENT(&value) && !BSON_ITER_HOLDS_REGEX(&value)) {
    AppendValue(filter, key, value);
    return;
  }
  Doc eq;
  AppendValue(eq.mut(), "$eq", value);
  AppendDoc(filter, key, eq);
}

Doc IdAndFields(const bson_t* doc, const std::vector<std::string>& fields) {
  Doc out;
  if (auto id = Find(doc, "_id")) AppendValue(out.mut(), "_id", *id);
  bson_iter_t it;
  bson_iter_init(&it, doc);
  while (bson_iter_next(&it)) {
    std::string_view key = bson_iter_key(&it);
    if (key != "_id" && std::find(fields.begin(), fields.end(), key) != fields.end()) AppendValue(out.mut(), key, it);
  }
  return out;
}

std::string JsonQuote(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

void AppendString(bson_t* out, std::string_view key, std::string_view value) {
  bson_append_utf8(out, key.data(), static_cast<int>(key.size()), value.data(),
                   static_cast<int>(value.size()));
}

std::vector<Doc> ArrayDocuments(const bson_iter_t& array_iter) {
  std::vector<Doc> docs;
  bson_iter_t child;
  bson_iter_t copy = array_iter;
  if (!bson_iter_recurse(&copy, &child)) return docs;
  while (bson_iter_next(&child)) {
    if (!BSON_ITER_HOLDS_DOCUMENT(&child)) continue;
    uint32_t length = 0;
    const uint8_t* data = nullptr;
    bson_iter_document(&child, &length, &data);
    docs.push_back(Doc::FromBytes({data, length}));
  }
  return docs;
}

// Walked with WalkTopLevel, not a libbson iterator: an insert's documents
// pass here once per document (measured with callgrind: a third of the cost).
std::vector<std::span<const uint8_t>> ArrayDocumentViews(const bson_iter_t& array_iter) {
  std::vector<std::span<const uint8_t>> views;
  if (!BSON_ITER_HOLDS_ARRAY(&array_iter)) return views;
  uint32_t length = 0;
  const uint8_t* data = nullptr;
  bson_iter_array(&array_iter, &length, &data);
  WalkTopLevel({data, length}, [&views](const BsonElement& element) {
    if (element.type == BSON_TYPE_DOCUMENT) views.push_back(element.value);
    return true;
  });
  return views;
}

}  // namespace remold
