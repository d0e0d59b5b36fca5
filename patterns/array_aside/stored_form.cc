#include "patterns/array_aside/stored_form.h"

#include <algorithm>
#include <string>
#include <utility>

#include "common/derived_id.h"
#include "rewrite/unchanged_guard.h"

namespace remold {
namespace {

Doc Json(const std::string& text) { return *Doc::FromJson(text); }

}  // namespace

namespace {

// Where the view's $lookup puts a document's pages, until it is made whole.
constexpr const char* kPagesField = "_remold_pages";

std::string Marker(const AsideLayout& rule, std::string_view subfield) { return rule.marker + "." + std::string(subfield); }

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

// The replacement upsert of page `seq` of `key`, holding values[from, to):
// a page of elements, or one element of the document whose _id is `id`.
Doc PageUpsert(const AsideLayout& rule, const bson_iter_t& key, const bson_iter_t& id, int32_t seq,
               const std::vector<bson_iter_t>& values, size_t from, size_t to) {
  const bson_oid_t* parent = bson_iter_oid(&key);
  std::string seed(reinterpret_cast<const char*>(parent->bytes), 12);
  seed.push_back('\0');
  seed += "page " + std::to_string(seq);
  Doc derived, page, statement;
  AppendDerivedId(derived.mut(), "_id", seed);
  if (rule.one_per_document) {
    AppendValue(page.mut(), "key", key);
    AppendValue(page.mut(), "parent", id);
    BSON_APPEND_INT32(page.mut(), "seq", seq);
    AppendValue(page.mut(), "event", values[from]);
  } else {
    AppendValue(page.mut(), "parent", key);
    BSON_APPEND_INT32(page.mut(), "seq", seq);
    AppendValues(page.mut(), "elements", values, from, to);
  }
  AppendDoc(statement.mut(), "q", derived);
  AppendDoc(statement.mut(), "u", page);
  BSON_APPEND_BOOL(statement.mut(), "upsert", true);
  return statement;
}

// An unmarked document with more than `first` elements: its first `first`
// stay (or a copy of its latest `latest`), full pages of the rest go
// aside, what is left is the tail.
MoveAside SpilledDocument(const AsideLayout& rule, const Doc& stored, const bson_iter_t& array,
                          std::span<const uint8_t> writer) {
  const std::vector<bson_iter_t> values = Elements(array);
  const size_t first = static_cast<size_t>(rule.first);
  const size_t n = static_cast<size_t>(rule.page);
  auto id = Find(stored.get(), "_id");
  if (values.size() <= first || !id) return {};
  Doc key_holder;
  std::string seed(reinterpret_cast<const char*>(stored.bytes().data()), stored.bytes().size());
  seed.append(reinterpret_cast<const char*>(writer.data()), writer.size());
  AppendDerivedId(key_holder.mut(), "key", seed);
  bson_iter_t key;
  bson_iter_init_find(&key, key_holder.get(), "key");
  MoveAside out;
  size_t from = first;
  int32_t pages = 0;
  for (; values.size() - from >= n; from += n)
    out.pages.push_back(PageUpsert(rule, key, *id, pages++, values, from, from + n));
  const size_t kept_from = rule.ArrayStartsWhole() ? 0 : values.size() - std::min(values.size(), size_t(rule.latest));
  const size_t kept_to = rule.ArrayStartsWhole() ? first : values.size();
  Doc document;
  bson_iter_t it;
  bson_iter_init(&it, stored.get());
  while (bson_iter_next(&it)) {
    if (rule.array == bson_iter_key(&it)) AppendValues(document.mut(), rule.array.c_str(), values, kept_from, kept_to);
    else AppendValue(document.mut(), bson_iter_key(&it), it);
  }
  bson_t marker;
  BSON_APPEND_DOCUMENT_BEGIN(document.mut(), rule.marker.c_str(), &marker);
  AppendValue(&marker, "key", key);
  BSON_APPEND_INT32(&marker, "pages", pages);
  // No empty tail: the marker holds one only while it has elements.
  if (from < values.size()) AppendValues(&marker, "tail", values, from, values.size());
  bson_append_document_end(document.mut(), &marker);
  Doc statement;
  AppendDoc(statement.mut(), "q", UnchangedAside(rule, stored));
  AppendDoc(statement.mut(), "u", document);
  out.document = std::move(statement);
  return out;
}

// A marked document whose tail holds `page` elements or more: full
// pages of it go aside, counted by an update that takes them off the tail
// while it is as long as read.
MoveAside FlushedTail(const AsideLayout& rule, const Doc& stored) {
  auto key = FindPath(stored.get(), Marker(rule, "key"));
  auto pages = FindPath(stored.get(), Marker(rule, "pages"));
  auto tail = FindPath(stored.get(), Marker(rule, "tail"));
  auto id = Find(stored.get(), "_id");
  if (!key || !BSON_ITER_HOLDS_OID(&*key) || !pages || !BSON_ITER_HOLDS_INT32(&*pages) || !tail ||
      !BSON_ITER_HOLDS_ARRAY(&*tail) || !id)
    return {};
  const std::vector<bson_iter_t> values = Elements(*tail);
  const size_t n = static_cast<size_t>(rule.page);
  if (values.size() < n) return {};
  MoveAside out;
  const int32_t first = bson_iter_int32(&*pages);
  // Page numbers stay well inside int32 (a document of 2^31 pages is not
  // one remold wrote).
  if (first < 0 || first > INT32_MAX - static_cast<int32_t>(values.size() / n) - 1) return {};
  int32_t next = first;
  size_t from = 0;
  for (; values.size() - from >= n; from += n) out.pages.push_back(PageUpsert(rule, *key, *id, next++, values, from, from + n));
  // Under a guard that the tail is as long as read (an append since makes
  // it miss: the next write flushes again, the page rewritten the same),
  // the first `from` elements taken off by keeping the rest ($slice).
  Doc q;
  AppendValue(q.mut(), "_id", *id);
  AppendValue(q.mut(), Marker(rule, "key"), *key);
  BSON_APPEND_INT32(q.mut(), Marker(rule, "pages").c_str(), first);
  Doc length;
  BSON_APPEND_INT64(length.mut(), "$size", static_cast<int64_t>(values.size()));
  AppendDoc(q.mut(), Marker(rule, "tail"), length);
  const std::string counted = "{\"" + Marker(rule, "pages") + "\": " + std::to_string(next) + "}";
  Doc u = from == values.size()
              ? Json("{\"$set\": " + counted + ", \"$unset\": {\"" + Marker(rule, "tail") + "\": \"\"}}")
              : Json("{\"$set\": " + counted + ", \"$push\": {\"" + Marker(rule, "tail") + "\": {\"$each\": [], \"$slice\": " +
                     std::to_string(-static_cast<int64_t>(values.size() - from)) + "}}}");
  Doc statement;
  AppendDoc(statement.mut(), "q", q);
  AppendDoc(statement.mut(), "u", u);
  out.document = std::move(statement);
  return out;
}

}  // namespace

Doc MarkedFilter(const AsideLayout& rule) { return Json("{" + JsonQuote(rule.marker + ".key") + ": {\"$exists\": true}}"); }
Doc UnmarkedFilter(const AsideLayout& rule) { return Json("{" + JsonQuote(rule.marker) + ": {\"$exists\": false}}"); }

namespace {

// The positions of seq 0..count-1, in that order, in `seqs` (an array
// expression of the seq of each page found): a page that is not there (an
// application deleted it) has none, and its elements are left out, as a
// deleted element is.
std::string Positions(const std::string& count, const std::string& seqs) {
  return R"({"$filter": {"input": {"$map": {"input": {"$range": [0, )" + count + R"(]}, "as": "s", "in": {"$indexOfArray": [)" +
         seqs + R"(, "$$s"]}}}, "as": "i", "cond": {"$gte": ["$$i", 0]}}})";
}

// The pages of a document in order (0..pages-1; a page written but not
// yet counted is left out), flattened: an expression over the pages the
// view's $lookup found, in whichever order it found them.
std::string PagesInOrder(const AsideLayout& rule) {
  const std::string m = rule.marker;
  const std::string count = R"({"$ifNull": ["$)" + m + R"(.pages", 0]})";
  const std::string found = std::string("\"$") + kPagesField + "\"";
  if (!rule.one_per_document) {
    const std::string pages = R"({"$map": {"input": )" + Positions(count, R"({"$map": {"input": )" + found +
                              R"(, "as": "p", "in": "$$p.seq"}})") + R"(, "as": "i", "in": {"$arrayElemAt": [{"$map": {"input": )" +
                              found + R"(, "as": "p", "in": "$$p.elements"}}, "$$i"]}}})";
    return R"({"$reduce": {"input": )" + pages + R"(, "initialValue": [], "in": {"$concatArrays": ["$$value", "$$this"]}}})";
  }
  // One element each, possibly many: in the order of the index {key, seq}
  // the $lookup read them by, they are taken as they are (linear); else
  // each seq is looked for (quadratic). The other way's input is empty, so
  // an engine that evaluates both branches of a $cond (docs/backends.md,
  // departure 1) pays for one.
  const std::string counted = R"({"$filter": {"input": )" + found + R"(, "as": "p", "cond": {"$lt": ["$$p.seq", )" + count + "]}}}";
  const std::string ordered = R"({"$eq": ["$$f.seq", {"$range": [0, )" + count + "]}]}";
  return R"({"$let": {"vars": {"f": )" + counted + R"(}, "in": {"$let": {"vars": {"ordered": )" + ordered +
         R"(}, "in": {"$cond": ["$$ordered", {"$map": {"input": "$$f", "as": "p", "in": "$$p.event"}}, {"$map": {"input": )" +
         Positions(R"({"$cond": ["$$ordered", 0, )" + count + "]}", "\"$$f.seq\"") +
         R"(, "as": "i", "in": {"$arrayElemAt": [{"$map": {"input": "$$f", "as": "p", "in": "$$p.event"}}, "$$i"]}}}]}}}}})";
}

// The $lookup of a document's pages by the marker's key, under a name of
// remold's (a dotted `as` is not read alike by every engine). The
// equality form: every engine serves it from the index on the key.
std::string PagesLookup(const AsideLayout& rule) {
  return R"({"$lookup": {"from": )" + JsonQuote(rule.aside.collection) + R"(, "localField": ")" + rule.marker +
         R"(.key", "foreignField": ")" + rule.KeyField() + R"(", "as": ")" + kPagesField + R"("}})";
}

}  // namespace

std::vector<Doc> AsideViewStages(const AsideLayout& rule) {
  const std::string m = rule.marker;
  const std::string a = JsonQuote("$" + rule.array);
  std::vector<Doc> stages;
  stages.push_back(Json(PagesLookup(rule)));
  // The embedded elements (when the array starts the whole), the pages,
  // the tail. Every branch is safe to evaluate on any document (DocumentDB
  // evaluates both branches of a $cond: docs/backends.md, departure 1).
  const std::string start = rule.ArrayStartsWhole() ? R"({"$cond": [{"$isArray": )" + a + "}, " + a + ", []]}, " : "";
  stages.push_back(Json(R"({"$addFields": {)" + JsonQuote(rule.array) + R"(: {"$cond": {"if": {"$eq": [{"$ifNull": ["$)" +
                        m + R"(.key", "none"]}, "none"]}, "then": )" + a + R"(, "else": {"$concatArrays": [)" + start +
                        PagesInOrder(rule) + R"(, {"$ifNull": ["$)" + m + R"(.tail", []]}]}}}}})"));
  // Twice: DocumentDB evaluates an $addFields after a single exclusion on
  // the document before it (docs/backends.md, departure 10), which would
  // show the marker and the pages to a pipeline after the view.
  stages.push_back(Json(R"({"$project": {")" + m + R"(": 0, ")" + kPagesField + R"(": 0}})"));
  stages.push_back(Json(R"({"$project": {")" + m + R"(": 0, ")" + kPagesField + R"(": 0}})"));
  return stages;
}

Doc NeedsMovingAsideFilter(const AsideLayout& rule) {
  const std::string n = std::to_string(rule.first);
  const std::string last = std::to_string(rule.page - 1);
  return Json(R"({"$or": [{)" + JsonQuote(rule.marker) + R"(: {"$exists": false}, )" +
              JsonQuote(rule.array + "." + n) + R"(: {"$exists": true}}, {)" + JsonQuote(Marker(rule, "tail") + "." + last) +
              R"(: {"$exists": true}}]})");
}

MoveAside MovedAside(const AsideLayout& rule, const Doc& stored, std::span<const uint8_t> writer) {
  if (Find(stored.get(), rule.marker.c_str())) return FlushedTail(rule, stored);
  auto array = Find(stored.get(), rule.array);
  if (!array || !BSON_ITER_HOLDS_ARRAY(&*array)) return {};
  return SpilledDocument(rule, stored, *array, writer);
}

Doc UnchangedAside(const AsideLayout& rule, const Doc& stored) {
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
  if (Find(stored.get(), rule.marker.c_str())) {
    if (FindPath(stored.get(), Marker(rule, "tail"))) {
      size_of(Marker(rule, "tail"));
    } else {
      Doc absent;
      BSON_APPEND_BOOL(absent.mut(), "$exists", false);
      AppendDoc(guard.mut(), Marker(rule, "tail"), absent);
    }
  }
  return guard;
}

BackendCommand EnsurePagesIndex(const AsideLayout& rule, bool creates) {
  BackendCommand command;
  bson_t* body = command.body.mut();
  AppendString(body, "createIndexes", rule.aside.collection);
  if (rule.one_per_document)
    AppendArray(body, "indexes", {Json(R"({"key": {"key": 1, "seq": 1}, "name": "remold_history_key_seq"})")});
  else
    AppendArray(body, "indexes", {Json(R"({"key": {"parent": 1, "seq": 1}, "name": "remold_outlier_pages"})")});
  AppendString(body, "$db", rule.aside.db);
  command.skip_if_collection_missing = !creates;
  return command;
}

std::optional<BackendCommand> EnsureParentIndex(const AsideLayout& rule, bool creates) {
  if (!rule.one_per_document) return std::nullopt;
  BackendCommand command;
  bson_t* body = command.body.mut();
  AppendString(body, "createIndexes", rule.aside.collection);
  AppendArray(body, "indexes", {Json(R"({"key": {"parent": 1, "seq": 1}, "name": "parent_1_seq_1"})")});
  AppendString(body, "$db", rule.aside.db);
  command.skip_if_collection_missing = !creates;
  // The application's own index on those keys, under another name, serves.
  command.holds_on_code = 85;  // IndexOptionsConflict
  return command;
}

BackendCommand EnsureMarkedIndex(const AsideLayout& rule) {
  BackendCommand command;
  bson_t* body = command.body.mut();
  AppendString(body, "createIndexes", rule.logical.collection);
  AppendArray(body, "indexes", {Json(R"({"key": {)" + JsonQuote(rule.marker + ".key") + R"(: 1}, "name": "remold_)" +
                                     rule.pattern + R"(_marked", "sparse": true})")});
  AppendString(body, "$db", rule.logical.db);
  command.skip_if_collection_missing = true;
  return command;
}

std::optional<Doc> MarkerKey(const AsideLayout& rule, const Doc& stored) {
  auto key = FindPath(stored.get(), Marker(rule, "key"));
  if (!key) return std::nullopt;
  return Boxed(*key);
}

}  // namespace remold
