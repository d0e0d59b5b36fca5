#include "patterns/extended_reference/copies.h"

#include <algorithm>
#include <cmath>

#include "rewrite/cursor_reply.h"

namespace remold {
namespace {

// Rounds of read, fan-out and check one sync may take while the
// referenced document keeps changing.
constexpr int kMaxSyncRounds = 8;
// Referencing documents whose copy one batch sets; a sync that sets
// this many or more is large, and logged.
constexpr int32_t kFanOutBatch = 1000;

Doc Statement(const Doc& q, const Doc& u, bool multi) {
  Doc statement;
  AppendDoc(statement.mut(), "q", q);
  AppendDoc(statement.mut(), "u", u);
  BSON_APPEND_BOOL(statement.mut(), "multi", multi);
  return statement;
}

}  // namespace

std::optional<bson_iter_t> ReferenceOf(const bson_t* doc, const std::string& field) {
  if (!doc) return std::nullopt;
  std::optional<bson_iter_t> ref = Find(doc, field);
  if (!ref || BSON_ITER_HOLDS_NULL(&*ref) || BSON_ITER_HOLDS_UNDEFINED(&*ref) || BSON_ITER_HOLDS_ARRAY(&*ref))
    return std::nullopt;
  return ref;
}

Doc CopyOf(const ExtendedReferenceRule& rule, const bson_t* referenced) {
  return IdAndFields(referenced, rule.fields);
}

std::string KeyOf(const bson_iter_t& value) {
  // 1, 1L and 1.0 name one document, as the backend's $in matches them.
  if (BSON_ITER_HOLDS_INT32(&value) || BSON_ITER_HOLDS_INT64(&value))
    return "i" + std::to_string(bson_iter_as_int64(&value));
  if (BSON_ITER_HOLDS_DOUBLE(&value)) {
    const double d = bson_iter_double(&value);
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.2e18)
      return "i" + std::to_string(static_cast<int64_t>(d));
  }
  Doc box = Boxed(value);
  return std::string(reinterpret_cast<const char*>(box.bytes().data()), box.bytes().size());
}

BackendCommand ReadReferenced(const ExtendedReferenceRule& rule, const std::vector<Doc>& refs,
                              const Command& client) {
  BackendCommand read;
  bson_t* body = read.body.mut();
  AppendString(body, "find", rule.referenced.collection);
  Doc in, filter, projection;
  const bson_iter_t first = refs.empty() ? bson_iter_t{} : Unboxed(refs.front());
  if (refs.size() == 1 && !BSON_ITER_HOLDS_REGEX(&first)) {
    // One document: {_id: v}, which every server answers from the _id index.
    AppendEquals(filter.mut(), "_id", first);
  } else {
    bson_t array;
    bson_append_array_begin(in.mut(), "$in", -1, &array);
    // A regular expression in $in would match by pattern; no _id is one,
    // so it names no document and is not asked for.
    size_t i = 0;
    for (const Doc& ref : refs)
      if (bson_iter_t v = Unboxed(ref); !BSON_ITER_HOLDS_REGEX(&v)) AppendValue(&array, std::to_string(i++), v);
    bson_append_array_end(in.mut(), &array);
    AppendDoc(filter.mut(), "_id", in);
  }
  BSON_APPEND_INT32(projection.mut(), "_id", 1);
  for (const std::string& f : rule.fields) BSON_APPEND_INT32(projection.mut(), f.c_str(), 1);
  AppendDoc(body, "filter", filter);
  AppendDoc(body, "projection", projection);
  BSON_APPEND_INT32(body, "batchSize", static_cast<int32_t>(std::max<size_t>(refs.size(), 1)));
  BSON_APPEND_BOOL(body, "singleBatch", true);
  SealCommand(client, ArgumentTarget::kRead, rule.referenced.db, body);
  read.may_fail = true;
  return read;
}

CopyTable::CopyTable(const ExtendedReferenceRule& rule, const Doc& reply) : rule_(rule) {
  for (const Doc& doc : FirstBatch(reply)) {
    std::optional<bson_iter_t> id = Find(doc.get(), "_id");
    if (id) copies_.emplace(KeyOf(*id), CopyOf(rule, doc.get()));
  }
}

std::optional<Doc> CopyTable::For(const bson_iter_t& reference) const {
  Doc box;
  auto it = copies_.find(KeyOf(reference));
  if (it != copies_.end()) {
    AppendDoc(box.mut(), "v", it->second);
    return box;
  }
  if (rule_.missing == ExtendedReferenceRule::Missing::kError) return std::nullopt;
  BSON_APPEND_NULL(box.mut(), "v");
  return box;
}

std::string ValueText(const bson_iter_t& value) {
  // { "v" : X } -> X
  std::string json = Boxed(value).ToRelaxedJson();
  const size_t start = json.find(':');
  if (start == std::string::npos || json.size() < start + 4) return json;
  return json.substr(start + 2, json.size() - start - 4);
}

Refusal MissingReference(const ExtendedReferenceRule& rule, const bson_iter_t& reference) {
  return {error_codes::kDocumentValidationFailure,
          rule.Who() + ": '" + rule.reference + "' refers to " + ValueText(reference) + ", which is not in " +
              rule.referenced.full() + " (missing: error)"};
}

std::string SyncLine(const ExtendedReferenceRule& rule) {
  return "read the document, find the documents of " + rule.logical.full() + " holding another copy (up to " +
         std::to_string(kFanOutBatch) + " at a time), set the copy on them, and read the document again; " +
         "another round if it changed";
}

namespace {

// {field: value} for the documents whose reference names `value` as an
// insert links it (KeyOf): int32, int64 and double are one number, and a
// Decimal128 is its own, though the backend's equality matches it with
// them (1 and Decimal128("1")): the filter says which kind it does not
// want, {$eq: v, $not: {$exists: true, $type: ...}}. The same documents as naming the
// kinds it wants with a positive $type, but DocumentDB scans the index's
// whole type bracket for a $type beside an $eq (59 ms against 0.8 ms at
// 100,000 documents: bench/README.md, extended_reference_bench on
// DocumentDB); a negated $type it tests on the documents the $eq found.
void AppendSameReference(bson_t* filter, const std::string& field, const bson_iter_t& value) {
  const bool decimal = BSON_ITER_HOLDS_DECIMAL128(&value);
  if (!decimal && !BSON_ITER_HOLDS_INT32(&value) && !BSON_ITER_HOLDS_INT64(&value) &&
      !BSON_ITER_HOLDS_DOUBLE(&value)) {
    AppendEquals(filter, field, value);
    return;
  }
  Doc test, other_kind;
  AppendValue(test.mut(), "$eq", value);
  // $exists first: Extended JSON readers (libbson's, remold explain's) take
  // a document starting with "$type" for a legacy binary value.
  BSON_APPEND_BOOL(other_kind.mut(), "$exists", true);
  if (decimal) {
    bson_t types;
    BSON_APPEND_ARRAY_BEGIN(other_kind.mut(), "$type", &types);
    BSON_APPEND_UTF8(&types, "0", "int");
    BSON_APPEND_UTF8(&types, "1", "long");
    BSON_APPEND_UTF8(&types, "2", "double");
    bson_append_array_end(other_kind.mut(), &types);
  } else {
    BSON_APPEND_UTF8(other_kind.mut(), "$type", "decimal");
  }
  AppendDoc(test.mut(), "$not", other_kind);
  AppendDoc(filter, field, test);
}

}  // namespace

CopySync::CopySync(const ExtendedReferenceRule& rule, const FollowerContext& context)
    : rule_(rule), context_(context) {}

void CopySync::Schedule(CommandQueue& queue, Doc reference) {
  refs_.push_back(std::move(reference));
  set_.push_back(0);
  Round(queue, refs_.size() - 1, 1);
}

BackendCommand CopySync::ReadOne(size_t ref) const { return ReadReferenced(rule_, {refs_[ref]}, context_.client); }

void CopySync::Round(CommandQueue& queue, size_t ref, int round) {
  queue.Push(ReadOne(ref), [this, &queue, ref, round](const Doc& reply) {
    if (!IsOkReply(reply))
      return ReportFollowUpFailure(context_, reply, "reading " + rule_.referenced.full() + " to sync its copies");
    std::vector<Doc> docs = FirstBatch(reply);
    Doc copy;
    if (docs.empty()) BSON_APPEND_NULL(copy.mut(), "v");  // gone: the copies say so
    else AppendDoc(copy.mut(), "v", CopyOf(rule_, docs.front().get()));
    Batch(queue, ref, round, std::move(copy));
  });
}

void CopySync::Batch(CommandQueue& queue, size_t ref, int round, Doc copy) {
  // {<reference>: ref, <into>: {$ne: copy}}: the documents still holding another copy.
  Doc filter, ne;
  AppendSameReference(filter.mut(), rule_.reference, Unboxed(refs_[ref]));
  AppendValue(ne.mut(), "$ne", Unboxed(copy));
  AppendDoc(filter.mut(), rule_.into, ne);
  BackendCommand find;
  bson_t* body = find.body.mut();
  AppendString(body, "find", rule_.logical.collection);
  AppendDoc(body, "filter", filter);
  Doc id_only;
  BSON_APPEND_INT32(id_only.mut(), "_id", 1);
  AppendDoc(body, "projection", id_only);
  BSON_APPEND_INT32(body, "limit", kFanOutBatch);
  BSON_APPEND_INT32(body, "batchSize", kFanOutBatch);
  BSON_APPEND_BOOL(body, "singleBatch", true);
  SealCommand(context_.client, ArgumentTarget::kRead, rule_.logical.db, body);
  find.may_fail = true;
  queue.Push(std::move(find), [this, &queue, ref, round, copy, filter](const Doc& reply) {
    if (!IsOkReply(reply))
      return ReportFollowUpFailure(context_, reply, "reading " + rule_.logical.full() + " to sync its copies");
    std::vector<Doc> ids = StoredDocuments(reply);
    if (ids.empty()) return Verify(queue, ref, round, copy);
    // One statement per document, {_id: id, <filter>} -> {$set: {<into>: copy}},
    // in _id order: every write of remold's that locks several documents
    // locks them in one order (InLockOrder), so that concurrent syncs of
    // one document never deadlock each other or a client's write queued
    // between them, as one multi-document update could on an engine that
    // holds its row locks to the end of the statement (DocumentDB:
    // docs/backends.md).
    Doc u, set;
    AppendValue(set.mut(), rule_.into, Unboxed(copy));
    AppendDoc(u.mut(), "$set", set);
    std::vector<Doc> statements;
    statements.reserve(ids.size());
    for (const Doc& id : ids) {
      Doc q;
      AppendValue(q.mut(), "_id", *Find(id.get(), "_id"));
      bson_concat(q.mut(), filter.get());
      statements.push_back(Statement(q, u, false));
    }
    BackendCommand update = UpdateCommand(context_.client, ArgumentTarget::kPreparatoryWrite, rule_.logical, false,
                                          InLockOrder(std::move(statements)));
    update.may_fail = true;
    const bool more = ids.size() == static_cast<size_t>(kFanOutBatch);
    queue.Push(std::move(update), [this, &queue, ref, round, copy, more](const Doc& reply) {
      if (!IsOkReply(reply) || Find(reply.get(), "writeErrors"))
        return ReportFollowUpFailure(context_, reply, "syncing the copies in " + rule_.logical.full() + "." + rule_.into);
      set_[ref] += FindInteger(reply.get(), "nModified").value_or(0);
      if (more) return Batch(queue, ref, round, copy);
      Verify(queue, ref, round, copy);
    });
  });
}

void CopySync::Verify(CommandQueue& queue, size_t ref, int round, Doc copy) {
  queue.Push(ReadOne(ref), [this, &queue, ref, round, copy](const Doc& reply) {
    if (!IsOkReply(reply))
      return ReportFollowUpFailure(context_, reply, "reading " + rule_.referenced.full() + " to sync its copies");
    std::vector<Doc> docs = FirstBatch(reply);
    Doc now;
    if (docs.empty()) BSON_APPEND_NULL(now.mut(), "v");
    else AppendDoc(now.mut(), "v", CopyOf(rule_, docs.front().get()));
    if (now == copy) return Done(ref);  // the copies set are the document as it is
    if (round >= kMaxSyncRounds) {
      Done(ref);
      if (!InTransaction(context_.client))
        context_.warnings->push_back("syncing the copies of " + rule_.referenced.full() + " " +
                                     refs_[ref].ToRelaxedJson() + " kept meeting other writers after " +
                                     std::to_string(kMaxSyncRounds) + " rounds; run `remold reconcile`");
      return;
    }
    Batch(queue, ref, round + 1, std::move(now));
  });
}

void CopySync::Done(size_t ref) {
  if (set_[ref] < kFanOutBatch || !context_.notices) return;
  // Names and numbers only: the reference's value is a document's.
  context_.notices->push_back("a write to " + rule_.referenced.full() + " set its copies on " +
                              std::to_string(set_[ref]) + " documents of " + rule_.logical.full());
}

}  // namespace remold
