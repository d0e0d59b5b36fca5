// Rebuilding a cursor reply ({cursor: {firstBatch|nextBatch, id, ns}, ...})
// field by field: the one loop every pattern uses to present backend
// cursors to the client (logical namespace, single batch, unfolded
// documents).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "common/doc.h"

namespace remold {

// The "cursor" document being rebuilt (a wrapper: libbson's bson_t carries
// an alignment attribute that std::function's signature would drop).
struct CursorOut {
  bson_t* doc;
};

// Called for each field of the reply's "cursor" document; returns true
// when it appended its own version of the field to `cursor.doc`, false to
// copy the field as it is.
using CursorFieldRewrite =
    std::function<bool(std::string_view key, const bson_iter_t& value, CursorOut cursor)>;

Doc RewriteCursorReply(const Doc& reply, const CursorFieldRewrite& rewrite);

// The common rewrites: cursor.ns set to `ns` (when given), cursor.id set to
// `id` (when given), the original id reported through `id_out`.
Doc WithCursor(const Doc& reply, std::optional<std::string_view> ns, std::optional<int64_t> id,
               int64_t* id_out = nullptr);

// The documents of a reply's cursor.firstBatch (none when it has none).
std::vector<Doc> FirstBatch(const Doc& reply);

// Those of them that have an _id: what a read of stored documents that
// projects _id returns. The backend stores no other document, so one
// without is a misbehaving backend's, and is left out.
std::vector<Doc> StoredDocuments(const Doc& reply);

}  // namespace remold
