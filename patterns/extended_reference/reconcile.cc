#include "patterns/extended_reference/reconcile.h"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>

namespace remold {
namespace {

constexpr size_t kBatch = 500;

bool Names(const std::optional<bson_iter_t>& ref) {
  return ref && !BSON_ITER_HOLDS_NULL(&*ref) && !BSON_ITER_HOLDS_UNDEFINED(&*ref) && !BSON_ITER_HOLDS_ARRAY(&*ref) &&
         !BSON_ITER_HOLDS_REGEX(&*ref);
}

// The copies of the documents `docs` reference, by LinkKey.
std::map<std::string, Doc> ReadCopies(const ReconcileContext& context, const ExtendedReferenceRule& rule,
                                      const std::vector<Doc>& docs) {
  Doc filter, in, projection, options;
  {
    bson_t array;
    bson_append_array_begin(in.mut(), "$in", -1, &array);
    size_t i = 0;
    for (const Doc& doc : docs)
      if (auto ref = Find(doc.get(), rule.reference); Names(ref)) AppendValue(&array, std::to_string(i++), *ref);
    bson_append_array_end(in.mut(), &array);
  }
  AppendDoc(filter.mut(), "_id", in);
  BSON_APPEND_INT32(projection.mut(), "_id", 1);
  for (const std::string& f : rule.fields) BSON_APPEND_INT32(projection.mut(), f.c_str(), 1);
  AppendDoc(options.mut(), "projection", projection);
  std::map<std::string, Doc> copies;
  context.Find(rule.referenced, filter.get(), options.get(), [&](const bson_t* found) {
    if (auto id = Find(found, "_id")) copies.emplace(LinkKey(*id), IdAndFields(found, rule.fields));
  });
  return copies;
}

// What `doc`'s copy should be: {v: copy or null}, nullopt for "absent";
// `skip` when the rule does not say (a frozen copy that exists).
std::optional<Doc> Expected(const ExtendedReferenceRule& rule, const bson_t* doc,
                            const std::map<std::string, Doc>& copies, bool& skip) {
  skip = false;
  std::optional<bson_iter_t> ref = Find(doc, rule.reference);
  if (!Names(ref)) return std::nullopt;
  if (rule.mode == ExtendedReferenceRule::Mode::kFrozen && Find(doc, rule.into)) {
    skip = true;
    return std::nullopt;
  }
  Doc box;
  auto it = copies.find(LinkKey(*ref));
  if (it != copies.end()) AppendDoc(box.mut(), "v", it->second);
  else BSON_APPEND_NULL(box.mut(), "v");
  return box;
}

bool Holds(const bson_t* doc, const std::string& into, const std::optional<Doc>& expected) {
  std::optional<bson_iter_t> stored = Find(doc, into);
  if (!expected) return !stored;
  if (!stored) return false;
  Doc box;
  AppendValue(box.mut(), "v", *stored);
  return box == *expected;
}

std::optional<Doc> ReadAgain(const ReconcileContext& context, const ExtendedReferenceRule& rule, const bson_iter_t& id) {
  Doc filter, projection, options;
  AppendEquals(filter.mut(), "_id", id);
  BSON_APPEND_INT32(projection.mut(), rule.reference.c_str(), 1);
  BSON_APPEND_INT32(projection.mut(), rule.into.c_str(), 1);
  AppendDoc(options.mut(), "projection", projection);
  BSON_APPEND_INT64(options.mut(), "limit", 1);
  std::optional<Doc> doc;
  context.Find(rule.logical, filter.get(), options.get(),
                       [&](const bson_t* found) { doc = Doc::FromBson(found); });
  return doc;
}

void CheckBatch(const ReconcileContext& context, const std::string& name, const ExtendedReferenceRule& rule,
                const std::vector<Doc>& batch, Summary& summary) {
  std::map<std::string, Doc> copies = ReadCopies(context, rule, batch);
  for (const Doc& read : batch) {
    bool skip = false;
    if (Holds(read.get(), rule.into, Expected(rule, read.get(), copies, skip)) || skip) continue;
    // Read again (the document, then what it references): a write landing
    // meanwhile is drift only if remold has not brought its copy in step.
    std::optional<bson_iter_t> id = Find(read.get(), "_id");
    if (!id) continue;  // none a collection stores (a view's document): nothing to read again by
    std::optional<Doc> now = ReadAgain(context, rule, *id);
    if (!now) continue;
    std::map<std::string, Doc> fresh = ReadCopies(context, rule, {*now});
    std::optional<Doc> expected = Expected(rule, now->get(), fresh, skip);
    if (skip || Holds(now->get(), rule.into, expected)) continue;
    DocumentDrift drift;
    drift.ns = rule.logical.full();
    drift.identity = IdentityOf(now->get()).ToRelaxedJson();
    FieldDrift field;
    field.field = rule.into;
    if (auto stored = Find(now->get(), rule.into)) field.observed = Value::Of(*stored);
    if (expected) field.expected = Value::Of(*Find(expected->get(), "v"));
    drift.fields.push_back(field);
    if (context.fix()) {
      // Where the document still holds the reference and the copy read.
      std::vector<Guard> guards = {{rule.into, field.observed}};
      if (auto ref = Find(now->get(), rule.reference)) guards.push_back({rule.reference, Value::Of(*ref)});
      Doc filter = GuardedFilter(IdentityOf(now->get()), guards);
      Doc update;
      if (expected) {
        Doc set;
        AppendValue(set.mut(), rule.into, *Find(expected->get(), "v"));
        AppendDoc(update.mut(), "$set", set);
      } else {
        Doc unset;
        AppendString(unset.mut(), rule.into, "");
        AppendDoc(update.mut(), "$unset", unset);
      }
      context.Repair(rule.logical, filter, update, false, drift);
    }
    summary.Count(drift);
    context.Report(drift);
  }
}

}  // namespace

std::vector<Summary> Reconcile(const ExtendedReferenceRule& rule, const ReconcileContext& context, const std::string& name) {
  Summary summary;
  summary.rule = name;
  summary.ns = rule.logical.full();
  std::unique_ptr<ScanProgress> progress = context.Scan(name, rule.logical);
  Doc projection, options;
  BSON_APPEND_INT32(projection.mut(), rule.reference.c_str(), 1);
  BSON_APPEND_INT32(projection.mut(), rule.into.c_str(), 1);
  AppendDoc(options.mut(), "projection", projection);
  // Read first, checked after: each check queries the backend, which a
  // cursor still open on the same connection would not allow.
  std::vector<Doc> documents;
  context.Find(rule.logical, Doc().get(), options.get(), [&](const bson_t* found) {
    ++summary.checked;
    documents.push_back(Doc::FromBson(found));
  });
  for (size_t start = 0; start < documents.size(); start += kBatch) {
    std::vector<Doc> batch(documents.begin() + static_cast<std::ptrdiff_t>(start),
                           documents.begin() + static_cast<std::ptrdiff_t>(std::min(documents.size(), start + kBatch)));
    for (size_t i = 0; i < batch.size(); ++i) progress->Step();
    CheckBatch(context, name, rule, batch, summary);
  }
  progress->Finish();
  return {summary};
}

}  // namespace remold
