#include "rewrite/one_document_delete.h"

#include <optional>
#include <string_view>

namespace remold {
namespace {

// Whether `value`, a filter's _id condition, is equality to one value: not
// an operator document ({$in: ...}, {$gt: ...}), a regular expression or an
// array (which matches elements, and is no _id).
bool PinsOneValue(const bson_iter_t& value) {
  switch (bson_iter_type(&value)) {
    case BSON_TYPE_ARRAY:
    case BSON_TYPE_REGEX:
      return false;
    case BSON_TYPE_DOCUMENT: {
      bson_iter_t child;
      if (!bson_iter_recurse(&value, &child)) return false;
      while (bson_iter_next(&child)) {
        if (bson_iter_key(&child)[0] == '$') return false;
      }
      return true;
    }
    default:
      return true;
  }
}

}  // namespace

Doc OneDocumentDelete(const Command& command, const Doc& statement, const Doc& sent) {
  if (Find(command.body.get(), "txnNumber")) return sent;
  const bson_t* body = statement.get();
  if (FindInteger(body, "limit").value_or(0) != 1 || Find(body, "collation")) return sent;
  const std::optional<Doc> filter = FindDocument(body, "q");
  if (!filter) return sent;
  const std::optional<bson_iter_t> id = Find(filter->get(), "_id");
  if (!id || !PinsOneValue(*id)) return sent;
  Doc out;
  bson_iter_t it;
  bson_iter_init(&it, sent.get());
  while (bson_iter_next(&it)) {
    const std::string_view key = bson_iter_key(&it);
    if (key == "limit") {
      BSON_APPEND_INT32(out.mut(), "limit", 0);
    } else {
      AppendValue(out.mut(), key, it);
    }
  }
  return out;
}

}  // namespace remold
