// What a client's update does to the fields a rule watches: whether
// it can change them, and (for the simple operators) their values after it,
// worked out from the document before the update.
// Pure.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/doc.h"

namespace remold {

// A statement's `u`: operators, a replacement document, or a pipeline.
struct ClientUpdate {
  Doc u;  // the document, or the pipeline as an array document
  bool pipeline = false;

  bool is_replacement() const;
};

ClientUpdate ClientUpdateOf(const bson_iter_t& u);

// Whether `update` may change one of the top-level `fields` (replacements
// and pipelines may change anything).
bool UpdateTouches(const ClientUpdate& update, const std::vector<std::string>& fields);

// The `fields` of `before` after `update` (absent fields are left out),
// when $set, $unset, $inc and $setOnInsert are all that touch them;
// nullopt when another operator, or a path inside one of them, does.
std::optional<Doc> FieldsAfterUpdate(const bson_t* before, const ClientUpdate& update,
                                     const std::vector<std::string>& fields);

// The `fields` of the document an upsert inserted with `id`: the fields its
// `query` pins by equality (`v` or {$eq: v}, at the top level or under
// `$and`), then `update` applied, $setOnInsert included (a replacement
// keeps only `_id`). nullopt when that cannot be worked out (another
// top-level operator such as $or, a path into a field, or an update
// FieldsAfterUpdate cannot follow).
std::optional<Doc> FieldsOfUpsert(const bson_t* query, const ClientUpdate& update,
                                  const std::vector<std::string>& fields, const bson_iter_t& id);

// {_id: v}: the _id an upsert's insert takes when the replacement or the
// query's `_id` equality (top-level or under `$and`) fixes it; nullopt
// when the backend generates it.
std::optional<Doc> UpsertIdOf(const bson_t* query, const ClientUpdate& update);

// Only `fields` of `doc` (those present).
Doc ProjectFields(const bson_t* doc, const std::vector<std::string>& fields);

}  // namespace remold
