// insert on a bucketed namespace -> one upsert per bucket on the bucket
// collection, coalescing the batch (see bucket.h).
//
// The whole batch is coalesced, one statement per bucket, ordered inserts
// included: after an ordered insert's first failed statement, the readings
// after its first one that earlier statements stored are taken out again
// (OrderedSteps), so that what is stored is always a prefix of the batch,
// as ordered semantics promise. A batch whose readings do not each have an
// _id of their own coalesces only runs of consecutive readings of a bucket.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "patterns/bucket/rewrite.h"
#include "patterns/bucket/pushdown.h"
#include "common/utf8.h"

namespace remold {
namespace {


// One client document, viewed in place in the command (never copied here).
struct Measurement {
  size_t index;  // in the client's batch
  std::span<const uint8_t> bytes;
  int64_t size = 0;  // what it adds to the bucket's kBytesField
};

// A document's bytes as a bson_t for reading, on the caller's stack.
class Reading {
 public:
  explicit Reading(std::span<const uint8_t> bytes) {
    bson_init_static(&bson_, bytes.data(), bytes.size());
  }
  Reading(const Reading&) = delete;
  Reading& operator=(const Reading&) = delete;
  const bson_t* get() const { return &bson_; }

 private:
  bson_t bson_;
};

struct Statement {
  std::string key;  // meta values + bucket start, for grouping
  Doc meta;         // the meta fields present, {field: value}
  std::vector<std::string> missing_meta;
  int64_t start_ms = 0;
  std::vector<Measurement> measurements;
  int64_t bytes = 0;  // what the measurements add to the bucket's kBytesField
  // The most kBytesField may reach: max_bytes, or less where large meta
  // values leave less room below the maximum document size.
  int64_t limit = 0;
};

// Bytes a measurement takes in the bucket's array besides its own: the
// element's type byte and its index key ("0".."9999999" and a NUL).
constexpr int64_t kElementOverhead = 9;
// Room kept for the bucket's other fields (_id, start, count, bytes,
// summaries, the array header) besides its meta values and readings.
constexpr int64_t kBucketOverhead = 16 * 1024;

bool IsMeta(const BucketRule& rule, std::string_view key) {
  return std::find(rule.meta_fields.begin(), rule.meta_fields.end(), key) != rule.meta_fields.end();
}

bool IsListed(const BucketRule& rule, std::string_view key) {
  return std::find(rule.measurement_fields.begin(), rule.measurement_fields.end(), key) !=
         rule.measurement_fields.end();
}

// One pass over a reading: where its time, meta and summarised fields are
// (the first of each name), the first field `fields` does not allow, and
// the BSON bytes the bucket's array takes for it.
struct ReadingFields {
  std::optional<bson_iter_t> id;
  std::optional<bson_iter_t> time;
  std::vector<std::optional<bson_iter_t>> meta;       // in rule.meta_fields' order
  std::vector<std::optional<bson_iter_t>> summaries;  // in rule.summaries' order
  std::optional<std::string_view> extra;
  int64_t measurement_bytes = 5 + kElementOverhead;  // the document's length and terminator
};

// Whether the bucket's array keeps `field` of a reading: all but the meta
// fields, or the rule's `fields`.
bool Kept(const BucketRule& rule, std::string_view field, bool meta) {
  return rule.measurement_fields.empty() ? !meta : IsListed(rule, field);
}

// Fills `out` (reused from reading to reading: no allocation after the
// first).
void ScanReading(const BucketRule& rule, const Reading& doc, ReadingFields& out) {
  out.id.reset();
  out.time.reset();
  out.extra.reset();
  out.measurement_bytes = 5 + kElementOverhead;
  out.meta.assign(rule.meta_fields.size(), std::nullopt);
  out.summaries.assign(rule.summaries.size(), std::nullopt);
  const bool check_extra = !rule.measurement_fields.empty() && !rule.drop_extra_fields;
  bson_iter_t it;
  bson_iter_init(&it, doc.get());
  while (bson_iter_next(&it)) {
    const std::string_view key = bson_iter_key(&it);
    bool meta = false;
    for (size_t i = 0; i < rule.meta_fields.size(); ++i) {
      if (key != rule.meta_fields[i]) continue;
      meta = true;
      if (!out.meta[i]) out.meta[i] = it;
    }
    if (!out.time && key == rule.time_field) out.time = it;
    if (!out.id && key == "_id") out.id = it;
    for (size_t i = 0; i < rule.summaries.size(); ++i)
      if (!out.summaries[i] && key == rule.summaries[i].field) out.summaries[i] = it;
    if (Kept(rule, key, meta)) out.measurement_bytes += static_cast<int64_t>(it.next_off - it.off);  // type, key, value
    if (check_extra && !out.extra && !meta && !IsListed(rule, key)) out.extra = key;
  }
}

// An _id as $in matches it: numbers by value (1, 1L and 1.0 are one;
// large longs may collide, which only makes a batch look less unique),
// anything else by type and bytes.
std::string IdKey(const bson_iter_t& id) {
  if (BSON_ITER_HOLDS_NUMBER(&id)) return "n" + std::to_string(bson_iter_as_double(&id));
  return std::string(1, static_cast<char>(bson_iter_type(&id))) +
         std::string(reinterpret_cast<const char*>(id.raw + id.d1), id.next_off - id.d1);
}

// {meta..., start}: the bucket a whole-batch statement wrote (a missing
// meta field as {$exists: false}).
Doc BucketOwner(const BucketRule& rule, const Statement& st) {
  Doc owner;
  bson_iter_t it;
  bson_iter_init(&it, st.meta.get());
  while (bson_iter_next(&it)) AppendEquals(owner.mut(), bson_iter_key(&it), it);
  for (const auto& missing : st.missing_meta) {
    Doc absent;
    BSON_APPEND_BOOL(absent.mut(), "$exists", false);
    AppendDoc(owner.mut(), missing, absent);
  }
  bson_append_date_time(owner.mut(), rule.bucket_time_field.c_str(), -1, st.start_ms);
  return owner;
}

// Checks one client document; fills the statement key on success.
std::optional<std::string> Classify(const BucketRule& rule, const std::string& who,
                                    const ReadingFields& doc, Statement& out) {
  if (doc.extra)
    return who + ": field '" + std::string(*doc.extra) + "' is not one of the rule's fields (meta fields and "
           "'fields') and would be lost; add it to 'fields', or set 'extra_fields: drop' to drop "
           "such fields";
  if (!doc.time)
    return "document has no '" + rule.time_field + "' field; the bucket rule for " +
           rule.logical.full() + " needs a date there";
  if (!BSON_ITER_HOLDS_DATE_TIME(&*doc.time))
    return "field '" + rule.time_field + "' must be a date for the bucket rule of " +
           rule.logical.full();
  for (size_t i = 0; i < rule.summaries.size(); ++i) {
    const std::optional<bson_iter_t>& value = doc.summaries[i];
    if (value && (BSON_ITER_HOLDS_ARRAY(&*value) || BSON_ITER_HOLDS_DECIMAL128(&*value)))
      return "summarised field '" + rule.summaries[i].field + "' must hold a single int, long or double "
             "(arrays and decimals are not summarised)";
  }
  out.start_ms = BucketStart(rule, bson_iter_date_time(&*doc.time));
  out.key.clear();
  for (size_t i = 0; i < rule.meta_fields.size(); ++i) {
    const std::string& field = rule.meta_fields[i];
    const std::optional<bson_iter_t>& value = doc.meta[i];
    // A missing meta field stays missing: its readings go to buckets
    // without the field and come back without it (null is a value of its
    // own, kept apart by an $exists guard).
    if (!value) {
      out.missing_meta.push_back(field);
      out.key += "\x01" + field;
      continue;
    }
    if (BSON_ITER_HOLDS_ARRAY(&*value))
      return "meta field '" + field + "' must not be an array";
    AppendValue(out.meta.mut(), field, *value);
  }
  // The meta document's bytes identify the group exactly (type included).
  auto bytes = out.meta.bytes();
  out.key.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  out.key.append(reinterpret_cast<const char*>(&out.start_ms), sizeof out.start_ms);
  out.bytes = doc.measurement_bytes;
  return std::nullopt;
}

// Sum of numbers: int64 while every addend is an integer and the sum fits,
// double otherwise. Min and max compare exactly (integers as integers, mixed
// through long double, which holds every int64) and leave NaN out: a query
// range never matches NaN, and $min would keep a NaN (the smallest BSON
// number) for good.
struct Accumulator {
  bool integral = true;
  bool any_sum = false;
  int64_t int_sum = 0;
  long double float_sum = 0;
  std::optional<bson_iter_t> min, max;

  static bool IsInteger(const bson_iter_t& v) {
    return BSON_ITER_HOLDS_INT32(&v) || BSON_ITER_HOLDS_INT64(&v);
  }
  static long double AsLongDouble(const bson_iter_t& v) {
    return IsInteger(v) ? static_cast<long double>(bson_iter_as_int64(&v)) : bson_iter_double(&v);
  }
  static bool Less(const bson_iter_t& a, const bson_iter_t& b) {
    if (IsInteger(a) && IsInteger(b)) return bson_iter_as_int64(&a) < bson_iter_as_int64(&b);
    return AsLongDouble(a) < AsLongDouble(b);
  }

  void Add(const bson_iter_t& v) {
    if (IsInteger(v)) {
      int64_t i = bson_iter_as_int64(&v);
      if (integral && __builtin_add_overflow(int_sum, i, &int_sum)) integral = false;
    } else if (BSON_ITER_HOLDS_DOUBLE(&v)) {
      integral = false;
    } else {
      return;  // summaries cover numbers only
    }
    float_sum += AsLongDouble(v);
    any_sum = true;
    if (BSON_ITER_HOLDS_DOUBLE(&v) && std::isnan(bson_iter_double(&v))) return;
    if (!min || Less(v, *min)) min = v;
    if (!max || Less(*max, v)) max = v;
  }
};

// Appends the measurement of `doc` (its fields but the meta fields, or the
// rule's `fields`, their bytes as they are) to `out` under `key`, and adds
// its summarised values to `acc`. `scratch` and `summarised` are buffers
// the caller reuses.
void AppendMeasurement(const BucketRule& rule, const Reading& doc, bson_t* out, const char* key, int key_length,
                       std::vector<Accumulator>& acc, std::vector<uint8_t>& scratch, std::vector<char>& summarised) {
  scratch.assign(4, 0);  // the length, set below
  summarised.assign(rule.summaries.size(), 0);
  bson_iter_t it;
  bson_iter_init(&it, doc.get());
  while (bson_iter_next(&it)) {
    const std::string_view field = bson_iter_key(&it);
    for (size_t s = 0; s < rule.summaries.size(); ++s) {
      if (summarised[s] || field != rule.summaries[s].field) continue;
      summarised[s] = 1;
      acc[s].Add(it);
    }
    if (Kept(rule, field, IsMeta(rule, field))) scratch.insert(scratch.end(), it.raw + it.off, it.raw + it.next_off);
  }
  scratch.push_back(0);
  const auto length = static_cast<int32_t>(scratch.size());
  std::memcpy(scratch.data(), &length, sizeof length);
  bson_t measurement;
  bson_init_static(&measurement, scratch.data(), scratch.size());
  bson_append_document(out, key, key_length, &measurement);
}

Doc BuildUpdate(const BucketRule& rule, const Statement& st) {
  std::vector<Accumulator> acc(rule.summaries.size());
  Doc update;
  bson_t* u = update.mut();
  // $push: {m: {$each: [...]}}
  {
    bson_t push, field, each;
    BSON_APPEND_DOCUMENT_BEGIN(u, "$push", &push);
    bson_append_document_begin(&push, rule.measurements_field.c_str(), -1, &field);
    BSON_APPEND_ARRAY_BEGIN(&field, "$each", &each);
    char buf[16];
    std::vector<uint8_t> scratch;
    std::vector<char> summarised;
    for (size_t i = 0; i < st.measurements.size(); ++i) {
      const char* k;
      size_t len = bson_uint32_to_string(static_cast<uint32_t>(i), &k, buf, sizeof buf);
      Reading doc(st.measurements[i].bytes);
      AppendMeasurement(rule, doc, &each, k, static_cast<int>(len), acc, scratch, summarised);
    }
    bson_append_array_end(&field, &each);
    bson_append_document_end(&push, &field);
    bson_append_document_end(u, &push);
  }
  // $inc: {count: k, "sum.f": ...}
  {
    bson_t inc;
    BSON_APPEND_DOCUMENT_BEGIN(u, "$inc", &inc);
    BSON_APPEND_INT32(&inc, BucketRule::kCountField, static_cast<int32_t>(st.measurements.size()));
    BSON_APPEND_INT32(&inc, BucketRule::kBytesField, static_cast<int32_t>(st.bytes));
    for (size_t s = 0; s < rule.summaries.size(); ++s) {
      if (!rule.summaries[s].sum || !acc[s].any_sum) continue;
      std::string path = std::string(BucketRule::kSumField) + "." + rule.summaries[s].field;
      if (acc[s].integral) BSON_APPEND_INT64(&inc, path.c_str(), acc[s].int_sum);
      else BSON_APPEND_DOUBLE(&inc, path.c_str(), static_cast<double>(acc[s].float_sum));
    }
    bson_append_document_end(u, &inc);
  }
  auto append_extreme = [&](const char* op, const char* prefix, bool want_min) {
    bson_t doc;
    bool opened = false;
    for (size_t s = 0; s < rule.summaries.size(); ++s) {
      bool wanted = want_min ? rule.summaries[s].min : rule.summaries[s].max;
      const auto& value = want_min ? acc[s].min : acc[s].max;
      if (!wanted || !value) continue;
      if (!opened) {
        bson_append_document_begin(u, op, -1, &doc);
        opened = true;
      }
      std::string path = std::string(prefix) + "." + rule.summaries[s].field;
      AppendValue(&doc, path, *value);
    }
    if (opened) bson_append_document_end(u, &doc);
  };
  append_extreme("$min", BucketRule::kMinField, true);
  append_extreme("$max", BucketRule::kMaxField, false);
  // $setOnInsert: {meta..., start}
  {
    bson_t soi;
    BSON_APPEND_DOCUMENT_BEGIN(u, "$setOnInsert", &soi);
    bson_iter_t it;
    bson_iter_init(&it, st.meta.get());
    while (bson_iter_next(&it)) AppendValue(&soi, bson_iter_key(&it), it);
    bson_append_date_time(&soi, rule.bucket_time_field.c_str(), -1, st.start_ms);
    bson_append_document_end(u, &soi);
  }
  return update;
}

// The BSON type alias of a number, for $type; nullptr for other values.
const char* NumberType(const bson_iter_t& value) {
  if (BSON_ITER_HOLDS_INT32(&value)) return "int";
  if (BSON_ITER_HOLDS_INT64(&value)) return "long";
  if (BSON_ITER_HOLDS_DOUBLE(&value)) return "double";
  if (BSON_ITER_HOLDS_DECIMAL128(&value)) return "decimal";
  return nullptr;
}

// Equality compares numbers by value (7 == 7.0 == 7L), so the bucket of
// `sensor: 7.0` would take readings of `sensor: 7` and give them back as
// 7.0. A type guard per number in the meta values (nested ones too) keeps
// one bucket per typed value, so each reading reads back as written. It
// excludes the other number types, {$not: {$exists: true, $type: [...]}}:
// beside the equality that pins the value, the same buckets as naming the
// value's own type, but DocumentDB scans the index's whole type bracket
// for a positive $type or $exists (13.8 ms against 0.5 ms a bucket upsert
// at 50,000 buckets), and tests a negated one on the buckets the equality
// found. ($exists comes first: Extended JSON readers, libbson's and remold
// explain's, take a document starting with "$type" for a legacy binary
// value.)
void AppendTypeGuards(const bson_iter_t& value, const std::string& path, std::vector<Doc>& out) {
  if (const char* type = NumberType(value)) {
    Doc guard, not_op, others;
    BSON_APPEND_BOOL(others.mut(), "$exists", true);
    bson_t types;
    BSON_APPEND_ARRAY_BEGIN(others.mut(), "$type", &types);
    int index = 0;
    for (const char* other : {"int", "long", "double", "decimal"}) {
      if (std::strcmp(other, type) == 0) continue;
      AppendString(&types, std::to_string(index++), other);
    }
    bson_append_array_end(others.mut(), &types);
    AppendDoc(not_op.mut(), "$not", others);
    AppendDoc(guard.mut(), path, not_op);
    out.push_back(std::move(guard));
  } else if (BSON_ITER_HOLDS_DOCUMENT(&value) || BSON_ITER_HOLDS_ARRAY(&value)) {
    bson_iter_t child;
    bson_iter_t copy = value;
    bson_iter_recurse(&copy, &child);
    while (bson_iter_next(&child))
      AppendTypeGuards(child, path + "." + bson_iter_key(&child), out);
  }
}

Doc BuildStatement(const BucketRule& rule, const Statement& st) {
  Doc q;
  bson_iter_t it;
  bson_iter_init(&it, st.meta.get());
  while (bson_iter_next(&it)) AppendValue(q.mut(), bson_iter_key(&it), it);
  for (const auto& missing : st.missing_meta) {
    Doc absent;
    BSON_APPEND_BOOL(absent.mut(), "$exists", false);
    AppendDoc(q.mut(), missing, absent);
  }
  bson_append_date_time(q.mut(), rule.bucket_time_field.c_str(), -1, st.start_ms);
  std::vector<Doc> guards;
  bson_iter_init(&it, st.meta.get());
  while (bson_iter_next(&it)) {
    if (BSON_ITER_HOLDS_NULL(&it)) {
      // {field: null} also matches a bucket without the field.
      Doc guard, present;
      BSON_APPEND_BOOL(present.mut(), "$exists", true);
      AppendDoc(guard.mut(), bson_iter_key(&it), present);
      guards.push_back(std::move(guard));
    }
    AppendTypeGuards(it, bson_iter_key(&it), guards);
  }
  if (!guards.empty()) AppendArray(q.mut(), "$and", guards);
  if (rule.max_count) {
    bson_t lte;
    BSON_APPEND_DOCUMENT_BEGIN(q.mut(), BucketRule::kCountField, &lte);
    BSON_APPEND_INT32(&lte, "$lte",
                      *rule.max_count - static_cast<int32_t>(st.measurements.size()));
    bson_append_document_end(q.mut(), &lte);
  }
  {
    // Only a bucket with room for these bytes; none for a reading larger
    // than the limit, which gets a bucket of its own. A bucket without the
    // field (written before it existed) takes no more readings.
    bson_t lte;
    BSON_APPEND_DOCUMENT_BEGIN(q.mut(), BucketRule::kBytesField, &lte);
    BSON_APPEND_INT32(&lte, "$lte", static_cast<int32_t>(st.limit - st.bytes));
    bson_append_document_end(q.mut(), &lte);
  }

  Doc statement;
  BSON_APPEND_DOCUMENT(statement.mut(), "q", q.get());
  Doc u = BuildUpdate(rule, st);
  BSON_APPEND_DOCUMENT(statement.mut(), "u", u.get());
  BSON_APPEND_BOOL(statement.mut(), "upsert", true);
  return statement;
}

// Groups the accepted documents into statements, in order of first use.
std::vector<Statement> Coalesce(const BucketRule& rule,
                                const std::vector<std::span<const uint8_t>>& docs,
                                const std::vector<std::optional<Statement>>& classified,
                                size_t accepted_end, bool ordered) {
  std::vector<Statement> statements;
  std::map<std::string, size_t> open;  // key -> statement accepting more
  const size_t max = rule.max_count ? static_cast<size_t>(*rule.max_count) : SIZE_MAX;
  for (size_t i = 0; i < accepted_end; ++i) {
    if (!classified[i]) continue;
    const Statement& c = *classified[i];
    auto has_room = [&](const Statement& st) {
      return st.measurements.size() < max && st.bytes + c.bytes <= st.limit;
    };
    size_t target = SIZE_MAX;
    if (ordered) {
      if (!statements.empty() && statements.back().key == c.key && has_room(statements.back()))
        target = statements.size() - 1;
    } else {
      auto it = open.find(c.key);
      if (it != open.end() && has_room(statements[it->second])) target = it->second;
    }
    if (target == SIZE_MAX) {
      statements.push_back(c);
      statements.back().measurements.clear();
      statements.back().bytes = 0;
      target = statements.size() - 1;
      open[c.key] = target;
    }
    statements[target].measurements.push_back({i, docs[i], c.bytes});
    statements[target].bytes += c.bytes;
  }
  return statements;
}

struct InsertShape {
  bool ordered;
  size_t batch_size;
  std::vector<RejectedReading> rejected;              // before anything ran
  std::vector<std::vector<std::vector<size_t>>> indexes;  // [command][statement] -> client indexes
};

// Client indexes whose measurements were not stored, with the backend error.
ShapedReply ShapeInsert(const InsertShape& shape, std::span<const Doc> replies) {
  std::vector<RejectedReading> errors = shape.rejected;
  size_t stored = 0;
  Doc last_write_concern_error;
  bool have_wce = false;
  size_t ran = 0;  // replies to the client's statements; any after them took readings out
  for (size_t c = 0; c < shape.indexes.size(); ++c) {
    const auto& statements = shape.indexes[c];
    if (c >= replies.size()) break;  // not run: an earlier ordered command failed
    ran = c + 1;
    std::map<size_t, std::pair<int, std::string>> failed;  // statement -> error
    size_t first_failure = statements.size();
    if (auto we = Find(replies[c].get(), "writeErrors"); we && BSON_ITER_HOLDS_ARRAY(&*we)) {
      for (const Doc& e : ArrayDocuments(*we)) {
        auto index = FindInteger(e.get(), "index");
        if (!index || *index < 0 || static_cast<size_t>(*index) >= statements.size()) continue;
        failed[static_cast<size_t>(*index)] = {
            static_cast<int>(FindInteger(e.get(), "code").value_or(8)),
            FindString(e.get(), "errmsg").value_or("bucket write failed")};
        first_failure = std::min(first_failure, static_cast<size_t>(*index));
      }
    }
    if (auto wce = FindDocument(replies[c].get(), "writeConcernError")) {
      last_write_concern_error = *wce;
      have_wce = true;
    }
    for (size_t s = 0; s < statements.size(); ++s) {
      auto f = failed.find(s);
      if (f != failed.end()) {
        for (size_t index : statements[s])
          errors.push_back({index, f->second.first, f->second.second});
      } else if (!shape.ordered || s < first_failure) {
        stored += statements[s].size();
      }
    }
    if (shape.ordered && first_failure < statements.size()) break;
  }
  std::sort(errors.begin(), errors.end(), [](auto& a, auto& b) { return a.index < b.index; });
  if (shape.ordered && errors.size() > 1) errors.resize(1);
  // Ordered: what is stored is the batch up to its first error (readings
  // after it that a whole-batch statement stored were taken out again).
  if (shape.ordered) stored = errors.empty() ? shape.batch_size : errors.front().index;
  std::vector<std::string> warnings;
  for (size_t k = ran; k < replies.size(); ++k) {
    if (IsOkReply(replies[k]) && !Find(replies[k].get(), "writeErrors")) continue;
    warnings.push_back("taking the readings after the first error of an ordered insert out of their buckets "
                       "failed (" + replies[k].ToRelaxedJson() + "): some of them may be stored");
  }

  ShapedReply out;
  bson_t* r = out.reply.mut();
  BSON_APPEND_INT32(r, "n", static_cast<int32_t>(stored));
  if (!errors.empty()) {
    bson_t array;
    BSON_APPEND_ARRAY_BEGIN(r, "writeErrors", &array);
    for (size_t i = 0; i < errors.size(); ++i) {
      bson_t e;
      std::string key = std::to_string(i);
      bson_append_document_begin(&array, key.c_str(), -1, &e);
      BSON_APPEND_INT32(&e, "index", static_cast<int32_t>(errors[i].index));
      BSON_APPEND_INT32(&e, "code", errors[i].code);
      AppendString(&e, "errmsg", ValidUtf8(errors[i].message));
      bson_append_document_end(&array, &e);
    }
    bson_append_array_end(r, &array);
  }
  if (have_wce) BSON_APPEND_DOCUMENT(r, "writeConcernError", last_write_concern_error.get());
  if (!replies.empty()) {
    for (const char* key : {"$clusterTime", "operationTime"}) {
      if (auto v = Find(replies.back().get(), key)) AppendValue(r, key, *v);
    }
  }
  BSON_APPEND_DOUBLE(r, "ok", 1.0);
  out.warnings = std::move(warnings);
  return out;
}

// The first statement of `reply` with a write error, if any.
std::optional<size_t> FirstWriteError(const Doc& reply) {
  std::optional<size_t> first;
  if (auto we = Find(reply.get(), "writeErrors"); we && BSON_ITER_HOLDS_ARRAY(&*we)) {
    for (const Doc& e : ArrayDocuments(*we)) {
      auto index = FindInteger(e.get(), "index");
      if (index && *index >= 0 && (!first || static_cast<size_t>(*index) < *first)) first = static_cast<size_t>(*index);
    }
  }
  return first;
}

// The statement that takes readings `removed` (their documents, each with
// an _id) out of the bucket `owner`: $pull of their _ids from `m`, and $inc
// of count, bytes (`bytes`, what they added) and sums by what they added.
// min and max stay as they were: still bounds of what is left, which is
// all that reads of the bucket ask of them. (A sum that took a NaN stays
// NaN.)
Doc TakeOut(const BucketRule& rule, const Doc& owner, const std::vector<std::span<const uint8_t>>& removed,
            int64_t bytes) {
  std::vector<Doc> ids;
  std::vector<Accumulator> sums(rule.summaries.size());
  for (std::span<const uint8_t> bytes_of : removed) {
    Reading doc(bytes_of);
    if (auto id = Find(doc.get(), "_id")) ids.push_back(Boxed(*id));
    for (size_t s = 0; s < rule.summaries.size(); ++s)
      if (auto v = Find(doc.get(), rule.summaries[s].field)) sums[s].Add(*v);
  }
  Doc q = owner, in, id_in, pull, inc, u;
  {
    Doc eq;
    AppendValue(eq.mut(), "$eq", Unboxed(ids.front()));
    AppendDoc(q.mut(), rule.measurements_field + "._id", eq);
  }
  {
    bson_t list;
    bson_append_array_begin(in.mut(), "$in", -1, &list);
    for (size_t i = 0; i < ids.size(); ++i) AppendValue(&list, std::to_string(i), Unboxed(ids[i]));
    bson_append_array_end(in.mut(), &list);
  }
  AppendDoc(id_in.mut(), "_id", in);
  AppendDoc(pull.mut(), rule.measurements_field, id_in);
  BSON_APPEND_INT32(inc.mut(), BucketRule::kCountField, -static_cast<int32_t>(ids.size()));
  BSON_APPEND_INT32(inc.mut(), BucketRule::kBytesField, -static_cast<int32_t>(bytes));
  for (size_t s = 0; s < rule.summaries.size(); ++s) {
    if (!rule.summaries[s].sum || !sums[s].any_sum) continue;
    const std::string path = std::string(BucketRule::kSumField) + "." + rule.summaries[s].field;
    if (sums[s].integral) BSON_APPEND_INT64(inc.mut(), path.c_str(), -sums[s].int_sum);
    else BSON_APPEND_DOUBLE(inc.mut(), path.c_str(), -static_cast<double>(sums[s].float_sum));
  }
  AppendDoc(u.mut(), "$pull", pull);
  AppendDoc(u.mut(), "$inc", inc);
  Doc statement;
  AppendDoc(statement.mut(), "q", q);
  AppendDoc(statement.mut(), "u", u);
  BSON_APPEND_BOOL(statement.mut(), "multi", false);
  return statement;
}

// An ordered insert coalesced across its batch: its backend commands one
// after the other; after the first write error, the readings of the batch
// after it that earlier statements stored are taken out again, so that
// what is stored is the batch up to that error, as an ordered insert
// promises.
struct OrderedInsert {
  BucketRule rule;
  Command client;
  std::vector<BackendCommand> batches;
  std::vector<size_t> first_statement;             // per batch
  std::vector<std::vector<size_t>> readings;       // per statement: client indexes
  std::vector<std::vector<int64_t>> reading_bytes;  // per statement, per reading
  std::vector<Doc> owners;                         // per statement
  Doc documents;                                   // the client's, for their _ids
};

Continuation OrderedSteps(std::shared_ptr<OrderedInsert> run) {
  return [run](std::span<const Doc> replies) -> Step {
    const size_t c = replies.size() - 1;
    std::optional<size_t> failed = FirstWriteError(replies.back());
    if (!failed) {
      if (c + 1 < run->batches.size()) return Step{{run->batches[c + 1]}, OrderedSteps(run)};
      return Step{};
    }
    if (InTransaction(run->client)) return Step{};  // the backend aborted it: nothing is stored
    if (c >= run->first_statement.size()) return Step{};
    const size_t failed_statement = run->first_statement[c] + *failed;
    if (failed_statement >= run->readings.size() || run->readings[failed_statement].empty()) return Step{};
    const std::vector<size_t>& failed_readings = run->readings[failed_statement];
    const size_t first_error = *std::min_element(failed_readings.begin(), failed_readings.end());
    std::vector<std::span<const uint8_t>> docs;
    if (auto array = Find(run->documents.get(), "v")) docs = ArrayDocumentViews(*array);
    std::vector<Doc> statements;
    for (size_t s = 0; s < failed_statement; ++s) {
      std::vector<std::span<const uint8_t>> removed;
      int64_t bytes = 0;
      for (size_t k = 0; k < run->readings[s].size(); ++k) {
        const size_t index = run->readings[s][k];
        if (index < first_error || index >= docs.size()) continue;
        removed.push_back(docs[index]);
        bytes += run->reading_bytes[s][k];
      }
      if (!removed.empty()) statements.push_back(TakeOut(run->rule, run->owners[s], removed, bytes));
    }
    if (statements.empty()) return Step{};
    BackendCommand take_out =
        UpdateCommand(run->client, ArgumentTarget::kPreparatoryWrite, run->rule.buckets, false, statements);
    take_out.may_fail = true;
    return Step{{std::move(take_out)}, nullptr};
  };
}

}  // namespace

BucketUpserts PlanBucketUpserts(const BucketRule& rule, const std::string& who,
                                const std::vector<std::span<const uint8_t>>& docs, bool ordered,
                                const Capabilities& caps) {
  BucketUpserts out;
  std::vector<std::optional<Statement>> classified(docs.size());
  size_t accepted_end = docs.size();
  ReadingFields fields;
  // Whole-batch statements for an ordered insert need every reading's _id
  // to be its own: a reading after the first error is taken out by it.
  std::set<std::string> ids;
  bool ids_unique = true;
  for (size_t i = 0; i < docs.size(); ++i) {
    Statement st;
    Reading doc(docs[i]);
    std::optional<RejectedReading> rejection;
    ScanReading(rule, doc, fields);
    if (ordered && ids_unique) {
      ids_unique = fields.id.has_value() && ids.insert(IdKey(*fields.id)).second;
    }
    if (auto error = Classify(rule, who, fields, st)) {
      rejection = RejectedReading{i, error_codes::kBadValue.value, *error};
    } else {
      const int64_t room = static_cast<int64_t>(caps.max_bson_object_size) -
                           static_cast<int64_t>(st.meta.bytes().size()) - kBucketOverhead;
      st.limit = std::min<int64_t>(rule.max_bytes, room);
      if (st.bytes > room)
        rejection = RejectedReading{i, error_codes::kBSONObjectTooLarge.value,
                                    who + ": this reading (" + std::to_string(st.bytes) +
                                        " bytes) is too large for a bucket document of at most " +
                                        std::to_string(caps.max_bson_object_size) + " bytes"};
    }
    if (rejection) {
      out.rejected.push_back(std::move(*rejection));
      if (ordered) {
        accepted_end = i;
        break;
      }
      continue;
    }
    classified[i] = std::move(st);
  }
  out.whole_batch = ordered && ids_unique;
  for (const Statement& st : Coalesce(rule, docs, classified, accepted_end, ordered && !out.whole_batch)) {
    Doc statement = BuildStatement(rule, st);
    if (statement.bytes().size() > static_cast<size_t>(caps.max_bson_object_size)) {
      out.too_large = who + ": the upsert of one bucket in this batch exceeds the maximum document size "
                      "(its readings, and its meta values twice); send smaller readings or meta values";
      return out;
    }
    std::vector<size_t> indexes;
    for (const auto& m : st.measurements) indexes.push_back(m.index);
    out.readings.push_back(std::move(indexes));
    out.statements.push_back(std::move(statement));
    if (out.whole_batch) {
      out.owners.push_back(BucketOwner(rule, st));
      std::vector<int64_t> sizes;
      for (const auto& m : st.measurements) sizes.push_back(m.size);
      out.reading_bytes.push_back(std::move(sizes));
    }
  }
  return out;
}

Plan RewriteBucketInsert(const Command& command, const BucketRule& rule, const std::string& who,
                         const Capabilities& caps) {
  Plan plan;
  auto documents_iter = Find(command.body.get(), "documents");
  if (!documents_iter || !BSON_ITER_HOLDS_ARRAY(&*documents_iter))
    return ImmediateReply(ErrorReply(error_codes::kFailedToParse, "insert needs a 'documents' array"));
  std::vector<std::span<const uint8_t>> docs = ArrayDocumentViews(*documents_iter);
  if (docs.empty())
    return ImmediateReply(ErrorReply(error_codes::kInvalidLength,
                                     "Write batch sizes must be between 1 and 100000. Got 0 operations."));
  const bool ordered = FindBool(command.body.get(), "ordered").value_or(true);

  InsertShape shape;
  shape.ordered = ordered;
  shape.batch_size = docs.size();
  BucketUpserts upserts = PlanBucketUpserts(rule, who, docs, ordered, caps);
  if (upserts.too_large) return ImmediateReply(ErrorReply(error_codes::kBSONObjectTooLarge, *upserts.too_large));
  shape.rejected = std::move(upserts.rejected);

  // Split into backend commands within the batch count and message size.
  const size_t max_statements = static_cast<size_t>(std::max(1, caps.max_write_batch_size));
  const size_t max_bytes = static_cast<size_t>(caps.max_message_size_bytes) - 64 * 1024;
  std::vector<std::vector<Doc>> batches(upserts.statements.empty() ? 0 : 1);
  size_t batch_bytes = 0;
  for (size_t k = 0; k < upserts.statements.size(); ++k) {
    Doc& statement = upserts.statements[k];
    if (batches.back().size() == max_statements ||
        batch_bytes + statement.bytes().size() > max_bytes) {
      batches.emplace_back();
      batch_bytes = 0;
      shape.indexes.emplace_back();
    }
    if (shape.indexes.empty()) shape.indexes.emplace_back();
    shape.indexes.back().push_back(std::move(upserts.readings[k]));
    batch_bytes += statement.bytes().size();
    batches.back().push_back(std::move(statement));
  }
  if (batches.size() > 1 && Find(command.body.get(), "txnNumber"))
    return ImmediateReply(ErrorReply(error_codes::kInvalidOptions,
        who + ": this insert needs " +
            std::to_string(batches.size()) + " backend batches, but a retryable write must be "
            "one command; send fewer documents per insert"));

  plan.ensure.push_back(EnsureBucketIndex(rule));
  if (ordered && upserts.whole_batch) {
    auto run = std::make_shared<OrderedInsert>();
    run->rule = rule;
    run->client = command;
    for (auto& batch : batches) {
      run->first_statement.push_back(run->readings.size());
      for (size_t k = 0; k < batch.size(); ++k) run->readings.push_back(shape.indexes[run->first_statement.size() - 1][k]);
      run->batches.push_back(UpdateCommand(command, ArgumentTarget::kWrite, rule.buckets, true, std::move(batch)));
    }
    run->reading_bytes = std::move(upserts.reading_bytes);
    run->owners = std::move(upserts.owners);
    AppendValue(run->documents.mut(), "v", *documents_iter);
    if (!run->batches.empty()) {
      plan.commands.push_back(run->batches.front());
      plan.then = OrderedSteps(run);
    }
  } else {
    for (auto& batch : batches)
      plan.commands.push_back(
          UpdateCommand(command, ArgumentTarget::kWrite, rule.buckets, ordered, std::move(batch)));
    plan.stop_on_write_errors = ordered;
  }
  plan.shape = [shape = std::move(shape)](std::span<const Doc> replies) {
    return ShapeInsert(shape, replies);
  };
  return plan;
}

}  // namespace remold
