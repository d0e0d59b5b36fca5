// Doc: an owned BSON document (RAII over libbson's bson_t), and the few
// helpers the rewrite and rule code share for reading and building BSON.
//
// Doc is a value type: copies are deep. Build with the libbson C API through
// mut(); read through get() and the Find* helpers.
#pragma once

#include <bson/bson.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace remold {

class Doc {
 public:
  Doc();
  ~Doc();
  Doc(const Doc& other);
  Doc& operator=(const Doc& other);
  Doc(Doc&& other) noexcept;
  Doc& operator=(Doc&& other) noexcept;

  // Copies a document from bytes that are already valid BSON.
  static Doc FromBytes(std::span<const uint8_t> bytes);
  static Doc FromBson(const bson_t* bson);
  // Parses (relaxed or canonical) Extended JSON; nullopt with `error` set.
  static std::optional<Doc> FromJson(std::string_view json, std::string* error = nullptr);

  const bson_t* get() const { return &bson_; }
  bson_t* mut() { return &bson_; }
  std::span<const uint8_t> bytes() const { return {bson_get_data(&bson_), bson_.len}; }
  bool empty() const { return bson_count_keys(&bson_) == 0; }

  // Canonical Extended JSON (stable types: what golden files hold).
  std::string ToCanonicalJson() const;
  // Relaxed Extended JSON (for people: explain, logs at debug level).
  std::string ToRelaxedJson() const;

  bool operator==(const Doc& other) const;

 private:
  bson_t bson_;
};

// Lookups on one level of a document; dotted paths are not expanded.
std::optional<bson_iter_t> Find(const bson_t* doc, std::string_view key);
// The first key of a document ("" for an empty one): a stage's name, a
// command's. Valid while `doc` is.
std::string_view FirstKey(const bson_t* doc);
std::optional<std::string> FindString(const bson_t* doc, std::string_view key);
std::optional<Doc> FindDocument(const bson_t* doc, std::string_view key);  // doc or array
std::optional<int64_t> FindInteger(const bson_t* doc, std::string_view key);  // int32/int64/whole double
// |n| of a limit: a negative limit asks for one batch of that many. The
// negation of INT64_MIN overflows: it is INT64_MAX here.
inline int64_t LimitMagnitude(int64_t n) { return n == INT64_MIN ? INT64_MAX : n < 0 ? -n : n; }
std::optional<bool> FindBool(const bson_t* doc, std::string_view key);  // any numeric or bool
// The value at a dotted path ("a.b.c"), descending through sub-documents only.
std::optional<bson_iter_t> FindPath(const bson_t* doc, std::string_view path);

// The value under `iter` as its own document {key: value}.
void AppendValue(bson_t* out, std::string_view key, const bson_iter_t& iter);
void AppendDoc(bson_t* out, std::string_view key, const Doc& doc);
void AppendArray(bson_t* out, std::string_view key, const std::vector<Doc>& docs);
void AppendString(bson_t* out, std::string_view key, std::string_view value);

// {name: spec}: a pipeline stage.
Doc Stage(std::string_view name, const Doc& spec);

// One value kept beyond the buffer it was read from, as {v: value};
// Unboxed views the value inside the box (valid while the box lives).
Doc Boxed(const bson_iter_t& value);
bson_iter_t Unboxed(const Doc& box);

// {key: value} for a filter: the value as it is, or {$eq: value} for a
// document (matched as a value even when it looks like an operator) and a
// regular expression (matched as a value, not as a pattern).
void AppendEquals(bson_t* filter, std::string_view key, const bson_iter_t& value);

// `doc`'s _id, then those of `fields` it has, in its own order: the copy
// of a document another one embeds.
Doc IdAndFields(const bson_t* doc, const std::vector<std::string>& fields);

// `text` as a JSON string literal, quotes included (for pipelines built as
// Extended JSON text).
std::string JsonQuote(std::string_view text);

// Calls fn(key, iter) for each element of the document or array value
// under `parent`.
template <class Fn>
void ForEachChild(const bson_iter_t& parent, Fn&& fn) {
  bson_iter_t child, copy = parent;
  if (!bson_iter_recurse(&copy, &child)) return;
  while (bson_iter_next(&child)) fn(std::string_view(bson_iter_key(&child)), child);
}

// The documents of an array value.
std::vector<Doc> ArrayDocuments(const bson_iter_t& array_iter);
// The same without copying: views into the buffer `array_iter` reads,
// valid while that buffer lives. Read one through a local bson_t
// (bson_init_static): a bson_t must not be copied once initialised.
std::vector<std::span<const uint8_t>> ArrayDocumentViews(const bson_iter_t& array_iter);

}  // namespace remold
