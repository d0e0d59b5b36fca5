#include "rewrite/cursor_reply.h"

#include <string>

namespace remold {

Doc RewriteCursorReply(const Doc& reply, const CursorFieldRewrite& rewrite) {
  Doc out;
  bson_iter_t it;
  bson_iter_init(&it, reply.get());
  while (bson_iter_next(&it)) {
    std::string_view key = bson_iter_key(&it);
    if (key != "cursor" || !BSON_ITER_HOLDS_DOCUMENT(&it)) {
      AppendValue(out.mut(), key, it);
      continue;
    }
    bson_t cursor;
    bson_iter_t child;
    bson_append_document_begin(out.mut(), "cursor", -1, &cursor);
    bson_iter_recurse(&it, &child);
    while (bson_iter_next(&child)) {
      std::string_view field = bson_iter_key(&child);
      if (!rewrite(field, child, CursorOut{&cursor})) AppendValue(&cursor, field, child);
    }
    bson_append_document_end(out.mut(), &cursor);
  }
  return out;
}

Doc WithCursor(const Doc& reply, std::optional<std::string_view> ns, std::optional<int64_t> id,
               int64_t* id_out) {
  return RewriteCursorReply(reply, [&](std::string_view key, const bson_iter_t& value, CursorOut cursor) {
    if (key == "ns" && ns) {
      AppendString(cursor.doc, "ns", *ns);
      return true;
    }
    if (key == "id") {
      if (id_out) *id_out = bson_iter_as_int64(&value);
      if (id) {
        BSON_APPEND_INT64(cursor.doc, "id", *id);
        return true;
      }
    }
    return false;
  });
}

std::vector<Doc> FirstBatch(const Doc& reply) {
  std::optional<Doc> cursor = FindDocument(reply.get(), "cursor");
  std::optional<bson_iter_t> batch = cursor ? Find(cursor->get(), "firstBatch") : std::nullopt;
  return batch && BSON_ITER_HOLDS_ARRAY(&*batch) ? ArrayDocuments(*batch) : std::vector<Doc>();
}

std::vector<Doc> StoredDocuments(const Doc& reply) {
  std::vector<Doc> docs = FirstBatch(reply);
  std::erase_if(docs, [](const Doc& doc) { return !Find(doc.get(), "_id"); });
  return docs;
}

}  // namespace remold
