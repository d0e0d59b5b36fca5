#include "patterns/subset/reconcile.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>

namespace remold {
namespace {

// {v: [the first N children, as the parent embeds them]}.
Doc ExpectedArray(const ReconcileContext& context, const SubsetRule& subset, const bson_iter_t& parent_id) {
  Doc filter, no_element, sort, projection, options;
  AppendEquals(filter.mut(), subset.link_from, parent_id);
  BSON_APPEND_BOOL(no_element.mut(), "$exists", false);
  AppendDoc(filter.mut(), subset.link_from + ".0", no_element);
  for (const SubsetSortKey& key : subset.Order()) BSON_APPEND_INT32(sort.mut(), key.field.c_str(), key.direction);
  BSON_APPEND_INT32(projection.mut(), "_id", 1);
  for (const std::string& f : subset.fields) BSON_APPEND_INT32(projection.mut(), f.c_str(), 1);
  AppendDoc(options.mut(), "sort", sort);
  AppendDoc(options.mut(), "projection", projection);
  BSON_APPEND_INT64(options.mut(), "limit", subset.limit);
  std::vector<Doc> children;
  context.Find(subset.logical, filter.get(), options.get(),
               [&](const bson_t* child) { children.push_back(Doc::FromBson(child)); });
  Doc expected;
  AppendArray(expected.mut(), "v", children);
  return expected;
}

// `doc` with its fields in name order: entries that differ only in field
// order hold the same values (a backend may return a projection's fields
// in the projection's order).
Doc Sorted(const Doc& doc) {
  std::vector<std::pair<std::string, bson_iter_t>> fields;
  bson_iter_t it;
  bson_iter_init(&it, doc.get());
  while (bson_iter_next(&it)) fields.emplace_back(bson_iter_key(&it), it);
  std::sort(fields.begin(), fields.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  Doc out;
  for (const auto& [key, value] : fields) AppendValue(out.mut(), key, value);
  return out;
}

// Whether `stored` ({v: value}, or nullopt: missing) holds the entries of
// `expected`, in order; no array at all is as good as an empty one.
bool InStep(const std::optional<Doc>& stored, const Doc& expected) {
  std::vector<Doc> want = ArrayDocuments(*Find(expected.get(), "v"));
  if (!stored) return want.empty();
  bson_iter_t value = *Find(stored->get(), "v");
  if (!BSON_ITER_HOLDS_ARRAY(&value)) return false;
  uint32_t count = 0;
  ForEachChild(value, [&](std::string_view, const bson_iter_t&) { ++count; });
  std::vector<Doc> have = ArrayDocuments(value);
  if (count != have.size() || have.size() != want.size()) return false;
  for (size_t i = 0; i < have.size(); ++i)
    if (!(Sorted(have[i]) == Sorted(want[i]))) return false;
  return true;
}

std::optional<Doc> StoredArray(const bson_t* parent, const std::string& array) {
  std::optional<bson_iter_t> value = Find(parent, array);
  if (!value) return std::nullopt;
  Doc box;
  AppendValue(box.mut(), "v", *value);
  return box;
}

// The parent as it is now ({_id, array}), or nullopt when it is gone.
std::optional<Doc> ReadParent(const ReconcileContext& context, const SubsetRule& subset, const bson_iter_t& id) {
  Doc filter, projection, options;
  AppendEquals(filter.mut(), "_id", id);
  BSON_APPEND_INT32(projection.mut(), subset.array.c_str(), 1);
  AppendDoc(options.mut(), "projection", projection);
  BSON_APPEND_INT64(options.mut(), "limit", 1);
  std::optional<Doc> parent;
  context.Find(subset.parent, filter.get(), options.get(),
               [&](const bson_t* found) { parent = Doc::FromBson(found); });
  return parent;
}

}  // namespace

std::vector<Summary> Reconcile(const SubsetRule& subset, const ReconcileContext& context, const std::string& rule) {
  Summary summary;
  summary.rule = rule;
  summary.ns = subset.parent.full();
  std::unique_ptr<ScanProgress> progress = context.Scan(rule, subset.parent);
  Doc projection, options;
  BSON_APPEND_INT32(projection.mut(), "_id", 1);
  AppendDoc(options.mut(), "projection", projection);
  // The parents' _ids first: each check below queries the backend, which a
  // cursor still open on the same connection would not allow.
  std::vector<Doc> ids;
  context.Find(subset.parent, Doc().get(), options.get(), [&](const bson_t* parent) {
    progress->Step();
    ++summary.checked;
    std::optional<bson_iter_t> id = Find(parent, "_id");
    if (!id) return;
    Doc box;
    AppendValue(box.mut(), "v", *id);
    ids.push_back(std::move(box));
  });
  for (const Doc& boxed : ids) {
    bson_iter_t id = Unboxed(boxed);
    // The parent first, then its children: a child written in between is
    // drift only if its follow-up has not reached the parent.
    std::optional<Doc> parent = ReadParent(context, subset, id);
    if (!parent) continue;
    std::optional<Doc> stored = StoredArray(parent->get(), subset.array);
    Doc expected = ExpectedArray(context, subset, id);
    if (InStep(stored, expected)) continue;
    DocumentDrift drift;
    drift.ns = subset.parent.full();
    drift.identity = IdentityOf(parent->get()).ToRelaxedJson();
    FieldDrift field;
    field.field = subset.array;
    if (stored) field.observed = Value::Of(Unboxed(*stored));
    field.expected = Value::Of(Unboxed(expected));
    drift.fields.push_back(field);
    if (context.fix()) {
      Guard guard{subset.array, field.observed};
      Doc filter = GuardedFilter(IdentityOf(parent->get()), {guard});
      context.Repair(subset.parent, filter, RepairUpdate(drift.fields), false, drift);
    }
    summary.Count(drift);
    context.Report(drift);
  }
  progress->Finish();
  return {summary};
}

}  // namespace remold
