#include "patterns/source_writes/update_apply.h"

#include <algorithm>
#include <functional>
#include <limits>

namespace remold {
namespace {

std::string_view FirstComponent(std::string_view path) { return path.substr(0, path.find('.')); }

bool Listed(const std::vector<std::string>& fields, std::string_view name) {
  return std::find(fields.begin(), fields.end(), name) != fields.end();
}

// {v: before + inc}, with MongoDB's $inc promotion; nullopt on int64
// overflow or non-numbers (the backend refuses those itself).
std::optional<Doc> Increment(const std::optional<bson_iter_t>& before, const bson_iter_t& inc) {
  Doc out;
  if (!BSON_ITER_HOLDS_NUMBER(&inc)) return std::nullopt;
  if (!before) {
    AppendValue(out.mut(), "v", inc);
    return out;
  }
  if (!BSON_ITER_HOLDS_NUMBER(&*before)) return std::nullopt;
  if (BSON_ITER_HOLDS_DOUBLE(&*before) || BSON_ITER_HOLDS_DOUBLE(&inc)) {
    BSON_APPEND_DOUBLE(out.mut(), "v", bson_iter_as_double(&*before) + bson_iter_as_double(&inc));
    return out;
  }
  int64_t sum = 0;
  if (__builtin_add_overflow(bson_iter_as_int64(&*before), bson_iter_as_int64(&inc), &sum))
    return std::nullopt;
  const bool both_int32 = BSON_ITER_HOLDS_INT32(&*before) && BSON_ITER_HOLDS_INT32(&inc);
  if (both_int32 && sum >= std::numeric_limits<int32_t>::min() &&
      sum <= std::numeric_limits<int32_t>::max())
    BSON_APPEND_INT32(out.mut(), "v", static_cast<int32_t>(sum));
  else
    BSON_APPEND_INT64(out.mut(), "v", sum);
  return out;
}

}  // namespace

bool ClientUpdate::is_replacement() const {
  if (pipeline) return false;
  bson_iter_t it;
  return !(bson_iter_init(&it, u.get()) && bson_iter_next(&it) && bson_iter_key(&it)[0] == '$');
}

ClientUpdate ClientUpdateOf(const bson_iter_t& u) {
  ClientUpdate update;
  update.pipeline = BSON_ITER_HOLDS_ARRAY(&u);
  uint32_t len = 0;
  const uint8_t* data = nullptr;
  if (update.pipeline) bson_iter_array(&u, &len, &data);
  else if (BSON_ITER_HOLDS_DOCUMENT(&u)) bson_iter_document(&u, &len, &data);
  if (data) update.u = Doc::FromBytes({data, len});
  return update;
}

bool UpdateTouches(const ClientUpdate& update, const std::vector<std::string>& fields) {
  if (fields.empty()) return false;
  if (update.pipeline || update.is_replacement()) return true;
  bool touches = false;
  bson_iter_t op;
  bson_iter_init(&op, update.u.get());
  while (bson_iter_next(&op) && !touches) {
    const bool rename = std::string_view(bson_iter_key(&op)) == "$rename";
    ForEachChild(op, [&](std::string_view path, const bson_iter_t& value) {
      if (Listed(fields, FirstComponent(path))) touches = true;
      if (rename && BSON_ITER_HOLDS_UTF8(&value) &&
          Listed(fields, FirstComponent(bson_iter_utf8(&value, nullptr))))
        touches = true;
    });
  }
  return touches;
}

Doc ProjectFields(const bson_t* doc, const std::vector<std::string>& fields) {
  Doc out;
  for (const auto& field : fields)
    if (auto value = Find(doc, field)) AppendValue(out.mut(), field, *value);
  return out;
}

namespace {

// `inserting`: the update is an upsert's insert ($setOnInsert applies).
std::optional<Doc> FieldsAfter(const bson_t* before, const ClientUpdate& update,
                               const std::vector<std::string>& fields, bool inserting) {
  if (update.pipeline) return std::nullopt;
  if (update.is_replacement()) {
    Doc after = ProjectFields(update.u.get(), fields);
    if (Listed(fields, "_id") && !Find(after.get(), "_id"))
      if (auto id = Find(before, "_id")) AppendValue(after.mut(), "_id", *id);
    return after;
  }
  // field -> {v: value} or absent, starting from `before`.
  std::vector<std::pair<std::string, std::optional<Doc>>> values;
  for (const auto& field : fields) {
    std::optional<Doc> value;
    if (auto it = Find(before, field)) {
      value.emplace();
      AppendValue(value->mut(), "v", *it);
    }
    values.emplace_back(field, std::move(value));
  }
  bool computable = true;
  bson_iter_t op;
  bson_iter_init(&op, update.u.get());
  while (bson_iter_next(&op)) {
    const std::string_view name = bson_iter_key(&op);
    ForEachChild(op, [&](std::string_view path, const bson_iter_t& arg) {
      std::string_view field = FirstComponent(path);
      auto slot = std::find_if(values.begin(), values.end(), [&](const auto& v) { return v.first == field; });
      if (name == "$rename" && BSON_ITER_HOLDS_UTF8(&arg) &&
          Listed(fields, FirstComponent(bson_iter_utf8(&arg, nullptr))))
        computable = false;
      if (slot == values.end() || (name == "$setOnInsert" && !inserting)) return;
      if (path != field) {
        computable = false;
        return;
      }
      std::optional<Doc>& value = slot->second;
      if (name == "$set" || name == "$setOnInsert") {
        value.emplace();
        AppendValue(value->mut(), "v", arg);
      } else if (name == "$unset") {
        value.reset();
      } else if (name == "$inc") {
        std::optional<bson_iter_t> current = value ? Find(value->get(), "v") : std::nullopt;
        std::optional<Doc> sum = Increment(current, arg);
        if (!sum) computable = false;
        else value = std::move(sum);
      } else {
        computable = false;
      }
    });
  }
  if (!computable) return std::nullopt;
  Doc after;
  for (const auto& [field, value] : values)
    if (value) AppendValue(after.mut(), field, *Find(value->get(), "v"));
  return after;
}

// The value a query's condition on a top-level field pins the field to:
// `v` or {$eq: v}; nullopt for any other condition.
std::optional<bson_iter_t> PinnedValue(const bson_iter_t& condition) {
  if (!BSON_ITER_HOLDS_DOCUMENT(&condition)) return condition;
  bson_iter_t child;
  if (!bson_iter_recurse(&condition, &child) || !bson_iter_next(&child)) return condition;  // {}
  const std::string_view first = bson_iter_key(&child);
  if (first.empty() || first[0] != '$') return condition;  // an embedded document
  if (first == "$eq" && !bson_iter_next(&child)) {
    bson_iter_t eq;
    bson_iter_recurse(&condition, &eq);
    bson_iter_next(&eq);
    return eq;
  }
  return std::nullopt;
}

// Calls `visit(key, condition)` for each top-level condition of `query`,
// those under `$and` included (MongoDB builds an upsert's document from
// both). False when the query holds another top-level operator ($or,
// $expr...): which fields it fixes cannot be told.
bool ForEachCondition(const bson_t* query,
                      const std::function<void(std::string_view key, const bson_iter_t& condition)>& visit) {
  bson_iter_t it;
  if (!bson_iter_init(&it, query)) return false;
  bool readable = true;
  while (bson_iter_next(&it)) {
    const std::string_view key = bson_iter_key(&it);
    if (key == "$and" && BSON_ITER_HOLDS_ARRAY(&it)) {
      bson_iter_t clause;
      bson_iter_recurse(&it, &clause);
      while (bson_iter_next(&clause)) {
        uint32_t length = 0;
        const uint8_t* data = nullptr;
        bson_t inner;
        if (BSON_ITER_HOLDS_DOCUMENT(&clause)) bson_iter_document(&clause, &length, &data);
        if (!data || !bson_init_static(&inner, data, length) || !ForEachCondition(&inner, visit))
          readable = false;
      }
    } else if (key != "$comment") {
      if (!key.empty() && key[0] == '$') readable = false;
      else visit(key, it);
    }
  }
  return readable;
}

}  // namespace

std::optional<Doc> FieldsAfterUpdate(const bson_t* before, const ClientUpdate& update,
                                     const std::vector<std::string>& fields) {
  return FieldsAfter(before, update, fields, false);
}

std::optional<Doc> FieldsOfUpsert(const bson_t* query, const ClientUpdate& update,
                                  const std::vector<std::string>& fields, const bson_iter_t& id) {
  Doc base;
  AppendValue(base.mut(), "_id", id);
  std::vector<std::string> pinned_fields;
  bool path_into_input = false;
  const bool readable = ForEachCondition(query, [&](std::string_view key, const bson_iter_t& condition) {
    std::string_view field = FirstComponent(key);
    if (!Listed(fields, field) || key == "_id") return;
    if (key != field) path_into_input = true;
    std::optional<bson_iter_t> pinned = PinnedValue(condition);
    if (!pinned || Listed(pinned_fields, field)) return;
    pinned_fields.emplace_back(field);
    AppendValue(base.mut(), std::string(key), *pinned);
  });
  if (!readable || path_into_input) return std::nullopt;
  return FieldsAfter(base.get(), update, fields, true);
}

std::optional<Doc> UpsertIdOf(const bson_t* query, const ClientUpdate& update) {
  std::optional<bson_iter_t> id;
  if (update.is_replacement()) id = Find(update.u.get(), "_id");
  if (!id)
    ForEachCondition(query, [&id](std::string_view key, const bson_iter_t& condition) {
      if (key == "_id" && !id) id = PinnedValue(condition);
    });
  if (!id) return std::nullopt;
  Doc box;
  AppendValue(box.mut(), "_id", *id);
  return box;
}

}  // namespace remold
