// What a client's update does to the fields a computed rule reads: whether
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

// Only `fields` of `doc` (those present).
Doc ProjectFields(const bson_t* doc, const std::vector<std::string>& fields);

}  // namespace remold
