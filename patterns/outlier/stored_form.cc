#include "patterns/outlier/stored_form.h"

#include <string>
#include <utility>

#include "common/derived_id.h"
#include "rewrite/unchanged_guard.h"

namespace remold {
namespace {

Doc Json(const std::string& text) { return *Doc::FromJson(text); }

}  // namespace

Doc UnchangedOutlier(const OutlierRule& rule, const Doc& stored);

namespace {

// Where the view's $lookup puts a document's pages, until it is made whole.
constexpr const char* kPagesField = "_remold_pages";

std::string Marker(std::string_view subfield) { return std::string(kOutlierMarker) + "." + std::string(subfield); }

// The values of an array value, each as an iterator into its buffer.
std::vector<bson_iter_t> Elements(const bson_iter_t& array) {
  std::vector<bson_iter_t> out;
  ForEachChild(array, [&](std::string_view, const bson_iter_t& value) { out.push_back(value); });
  return out;
}

void AppendValues(bson_t* out, const char* key, const std::vector<bson_iter_t>& values, size_t from, size_t to) {
  bson_t array;
  bson_append_array_begin(out, key, -1, &array);
  for (size_t i = from; i < to; ++i) AppendValue(&array, std::to_string(i - from), values[i]);
  bson_append_array_end(out, &array);
}

// The replacement upsert of page `seq` of `key`, holding values[from, to).
Doc PageUpsert(const OutlierRule& rule, const bson_iter_t& key, int32_t seq, const std::vector<bson_iter_t>& values,
               size_t from, size_t to) {
  const bson_oid_t* parent = bson_iter_oid(&key);
  std::string seed(reinterpret_cast<const char*>(parent->bytes), 12);
  seed.push_back('\0');
  seed += "page " + std::to_string(seq);
  Doc id, page, statement;
  AppendDerivedId(id.mut(), "_id", seed);
  AppendValue(page.mut(), "parent", key);
  BSON_APPEND_INT32(page.mut(), "seq", seq);
  AppendValues(page.mut(), "elements", values, from, to);
  AppendDoc(statement.mut(), "q", id);
  AppendDoc(statement.mut(), "u", page);
  BSON_APPEND_BOOL(statement.mut(), "upsert", true);
  (void)rule;
  return statement;
}

// An unmarked document with more than `threshold` elements: its first
// `threshold` stay, full pages of the rest go aside, what is left is the tail.
MoveAside SpilledDocument(const OutlierRule& rule, const Doc& stored, const bson_iter_t& array,
                          std::span<const uint8_t> writer) {
  const std::vector<bson_iter_t> values = Elements(array);
  const size_t n = static_cast<size_t>(rule.threshold);
  if (values.size() <= n) return {};
  Doc key_holder;
  std::string seed(reinterpret_cast<const char*>(stored.bytes().data()), stored.bytes().size());
  seed.append(reinterpret_cast<const char*>(writer.data()), writer.size());
  AppendDerivedId(key_holder.mut(), "key", seed);
  bson_iter_t key;
  bson_iter_init_find(&key, key_holder.get(), "key");
  MoveAside out;
  size_t from = n;
  int32_t pages = 0;
  for (; values.size() - from >= n; from += n) out.pages.push_back(PageUpsert(rule, key, pages++, values, from, from + n));
  Doc document;
  bson_iter_t it;
  bson_iter_init(&it, stored.get());
  while (bson_iter_next(&it)) {
    if (rule.array == bson_iter_key(&it)) AppendValues(document.mut(), rule.array.c_str(), values, 0, n);
    else AppendValue(document.mut(), bson_iter_key(&it), it);
  }
  bson_t marker;
  BSON_APPEND_DOCUMENT_BEGIN(document.mut(), kOutlierMarker, &marker);
  AppendValue(&marker, "key", key);
  BSON_APPEND_INT32(&marker, "pages", pages);
  // No empty tail: the marker holds one only while it has elements.
  if (from < values.size()) AppendValues(&marker, "tail", values, from, values.size());
  bson_append_document_end(document.mut(), &marker);
  Doc statement;
  AppendDoc(statement.mut(), "q", UnchangedOutlier(rule, stored));
  AppendDoc(statement.mut(), "u", document);
  out.document = std::move(statement);
  return out;
}

// A marked document whose tail holds `threshold` elements or more: full
// pages of it go aside, counted by an update that takes them off the tail
// while it is as long as read.
MoveAside FlushedTail(const OutlierRule& rule, const Doc& stored) {
  auto key = FindPath(stored.get(), Marker("key"));
  auto pages = FindPath(stored.get(), Marker("pages"));
  auto tail = FindPath(stored.get(), Marker("tail"));
  auto id = Find(stored.get(), "_id");
  if (!key || !BSON_ITER_HOLDS_OID(&*key) || !pages || !BSON_ITER_HOLDS_INT32(&*pages) || !tail ||
      !BSON_ITER_HOLDS_ARRAY(&*tail) || !id)
    return {};
  const std::vector<bson_iter_t> values = Elements(*tail);
  const size_t n = static_cast<size_t>(rule.threshold);
  if (values.size() < n) return {};
  MoveAside out;
  const int32_t first = bson_iter_int32(&*pages);
  // Page numbers stay well inside int32 (a document of 2^31 pages is not
  // one remold wrote).
  if (first < 0 || first > INT32_MAX - static_cast<int32_t>(values.size() / n) - 1) return {};
  int32_t next = first;
  size_t from = 0;
  for (; values.size() - from >= n; from += n) out.pages.push_back(PageUpsert(rule, *key, next++, values, from, from + n));
  // Under a guard that the tail is as long as read (an append since makes
  // it miss: the next write flushes again, the page rewritten the same),
  // the first `from` elements taken off by keeping the rest ($slice).
  Doc q;
  AppendValue(q.mut(), "_id", *id);
  AppendValue(q.mut(), Marker("key"), *key);
  BSON_APPEND_INT32(q.mut(), Marker("pages").c_str(), first);
  Doc length;
  BSON_APPEND_INT64(length.mut(), "$size", static_cast<int64_t>(values.size()));
  AppendDoc(q.mut(), Marker("tail"), length);
  const std::string counted = "{\"" + Marker("pages") + "\": " + std::to_string(next) + "}";
  Doc u = from == values.size()
              ? Json("{\"$set\": " + counted + ", \"$unset\": {\"" + Marker("tail") + "\": \"\"}}")
              : Json("{\"$set\": " + counted + ", \"$push\": {\"" + Marker("tail") + "\": {\"$each\": [], \"$slice\": " +
                     std::to_string(-static_cast<int64_t>(values.size() - from)) + "}}}");
  Doc statement;
  AppendDoc(statement.mut(), "q", q);
  AppendDoc(statement.mut(), "u", u);
  out.document = std::move(statement);
  return out;
}

}  // namespace

Doc MarkedFilter() { return Json(std::string("{\"") + kOutlierMarker + ".key\": {\"$exists\": true}}"); }
Doc UnmarkedFilter() { return Json(std::string("{\"") + kOutlierMarker + "\": {\"$exists\": false}}"); }

std::vector<Doc> OutlierViewStages(const OutlierRule& rule) {
  const std::string m = kOutlierMarker;
  const std::string a = JsonQuote("$" + rule.array);
  std::vector<Doc> stages;
  // The pages under a name of remold's (a dotted `as` is not read alike by
  // every engine), each page's elements and seq taken by $map.
  stages.push_back(Json(R"({"$lookup": {"from": )" + JsonQuote(rule.overflow.collection) + R"(, "localField": ")" + m +
                        R"(.key", "foreignField": "parent", "as": ")" + kPagesField + R"("}})"));
  // The pages in order (0..pages-1; a page written but not yet counted is
  // left out), flattened, between the embedded elements and the tail.
  // Every branch is safe to evaluate on any document (DocumentDB evaluates
  // both branches of a $cond: docs/backends.md, departure 1).
  const std::string found = std::string("\"$") + kPagesField + "\"";
  const std::string pages = R"({"$map": {"input": {"$range": [0, {"$ifNull": ["$)" + m + R"(.pages", 0]}]}, "as": "s", "in": )"
                            R"({"$arrayElemAt": [{"$map": {"input": )" + found + R"(, "as": "p", "in": "$$p.elements"}}, )"
                            R"({"$indexOfArray": [{"$map": {"input": )" + found + R"(, "as": "p", "in": "$$p.seq"}}, "$$s"]}]}}})";
  const std::string flat = R"({"$reduce": {"input": )" + pages +
                           R"(, "initialValue": [], "in": {"$concatArrays": ["$$value", "$$this"]}}})";
  stages.push_back(Json(R"({"$addFields": {)" + JsonQuote(rule.array) + R"(: {"$cond": {"if": {"$eq": [{"$ifNull": ["$)" +
                        m + R"(.key", "none"]}, "none"]}, "then": )" + a + R"(, "else": {"$concatArrays": [{"$cond": [{"$isArray": )" + a + "}, " + a +
                        ", []]}, " + flat + R"(, {"$ifNull": ["$)" + m + R"(.tail", []]}]}}}}})"));
  // Twice: DocumentDB evaluates an $addFields after a single exclusion on
  // the document before it (docs/backends.md, departure 10), which would
  // show the marker and the pages to a pipeline after the view.
  stages.push_back(Json(R"({"$project": {")" + m + R"(": 0, ")" + kPagesField + R"(": 0}})"));
  stages.push_back(Json(R"({"$project": {")" + m + R"(": 0, ")" + kPagesField + R"(": 0}})"));
  return stages;
}

Doc NeedsMovingAsideFilter(const OutlierRule& rule) {
  const std::string n = std::to_string(rule.threshold);
  const std::string last = std::to_string(rule.threshold - 1);
  return Json(R"({"$or": [{")" + std::string(kOutlierMarker) + R"(": {"$exists": false}, )" +
              JsonQuote(rule.array + "." + n) + R"(: {"$exists": true}}, {)" + JsonQuote(Marker("tail") + "." + last) +
              R"(: {"$exists": true}}]})");
}

MoveAside MovedAside(const OutlierRule& rule, const Doc& stored, std::span<const uint8_t> writer) {
  if (Find(stored.get(), kOutlierMarker)) return FlushedTail(rule, stored);
  auto array = Find(stored.get(), rule.array);
  if (!array || !BSON_ITER_HOLDS_ARRAY(&*array)) return {};
  return SpilledDocument(rule, stored, *array, writer);
}

Doc UnchangedOutlier(const OutlierRule& rule, const Doc& stored) {
  Doc guard = UnchangedDocument(stored);
  auto size_of = [&](const std::string& path) {
    auto array = FindPath(stored.get(), path);
    if (!array || !BSON_ITER_HOLDS_ARRAY(&*array)) return;
    int64_t n = 0;
    ForEachChild(*array, [&](std::string_view, const bson_iter_t&) { ++n; });
    Doc size;
    BSON_APPEND_INT64(size.mut(), "$size", n);
    AppendDoc(guard.mut(), path, size);
  };
  size_of(rule.array);
  if (Find(stored.get(), kOutlierMarker)) {
    if (FindPath(stored.get(), Marker("tail"))) {
      size_of(Marker("tail"));
    } else {
      Doc absent;
      BSON_APPEND_BOOL(absent.mut(), "$exists", false);
      AppendDoc(guard.mut(), Marker("tail"), absent);
    }
  }
  return guard;
}

BackendCommand EnsurePagesIndex(const OutlierRule& rule, bool creates) {
  BackendCommand command;
  bson_t* body = command.body.mut();
  AppendString(body, "createIndexes", rule.overflow.collection);
  AppendArray(body, "indexes", {Json(R"({"key": {"parent": 1, "seq": 1}, "name": "remold_outlier_pages"})")});
  AppendString(body, "$db", rule.overflow.db);
  command.skip_if_collection_missing = !creates;
  return command;
}

BackendCommand EnsureMarkedIndex(const OutlierRule& rule) {
  BackendCommand command;
  bson_t* body = command.body.mut();
  AppendString(body, "createIndexes", rule.logical.collection);
  AppendArray(body, "indexes", {Json(std::string(R"({"key": {")") + kOutlierMarker +
                                     R"(.key": 1}, "name": "remold_outlier_marked", "sparse": true})")});
  AppendString(body, "$db", rule.logical.db);
  command.skip_if_collection_missing = true;
  return command;
}

std::optional<Doc> MarkerKey(const Doc& stored) {
  auto key = FindPath(stored.get(), Marker("key"));
  if (!key) return std::nullopt;
  return Boxed(*key);
}

}  // namespace remold
