#include "rewrite/unchanged_guard.h"

#include <string>
#include <vector>

namespace remold {

Doc UnchangedDocument(const Doc& document) {
  Doc guard;
  if (auto id = Find(document.get(), "_id")) AppendValue(guard.mut(), "_id", *id);
  Doc literal, equal, expr;
  AppendDoc(literal.mut(), "$literal", document);
  bson_t args;
  BSON_APPEND_ARRAY_BEGIN(equal.mut(), "$eq", &args);
  BSON_APPEND_UTF8(&args, "0", "$$ROOT");
  AppendDoc(&args, "1", literal);
  bson_append_array_end(equal.mut(), &args);
  AppendDoc(guard.mut(), "$expr", equal);
  return guard;
}

Doc UnchangedFields(const Doc& document) {
  std::vector<Doc> equalities;
  bson_iter_t it;
  bson_iter_init(&it, document.get());
  int32_t fields = 0;
  while (bson_iter_next(&it)) {
    const std::string_view name = bson_iter_key(&it);
    if (name.empty() || name.find('.') != std::string_view::npos || name[0] == '$')
      return UnchangedDocument(document);
    ++fields;
    Doc literal, equal;
    AppendValue(literal.mut(), "$literal", it);
    bson_t args;
    BSON_APPEND_ARRAY_BEGIN(equal.mut(), "$eq", &args);
    BSON_APPEND_UTF8(&args, "0", ("$" + std::string(name)).c_str());
    AppendDoc(&args, "1", literal);
    bson_append_array_end(equal.mut(), &args);
    equalities.push_back(std::move(equal));
  }
  Doc size, count, equal;
  AppendString(count.mut(), "$objectToArray", "$$ROOT");
  AppendDoc(size.mut(), "$size", count);
  bson_t args;
  BSON_APPEND_ARRAY_BEGIN(equal.mut(), "$eq", &args);
  AppendDoc(&args, "0", size);
  BSON_APPEND_INT32(&args, "1", fields);
  bson_append_array_end(equal.mut(), &args);
  equalities.push_back(std::move(equal));
  Doc guard, all;
  if (auto id = Find(document.get(), "_id")) AppendValue(guard.mut(), "_id", *id);
  AppendArray(all.mut(), "$and", equalities);
  AppendDoc(guard.mut(), "$expr", all);
  return guard;
}

std::optional<Doc> GuardedDocument(const bson_t* filter) {
  std::optional<Doc> expr = FindDocument(filter, "$expr");
  std::optional<Doc> equal = expr ? FindDocument(expr->get(), "$eq") : std::nullopt;
  std::optional<Doc> literal = equal ? FindDocument(equal->get(), "1") : std::nullopt;
  std::optional<Doc> document = literal ? FindDocument(literal->get(), "$literal") : std::nullopt;
  // The rest of the filter is exactly the guard's: its _id, "$$ROOT", nothing more.
  if (!document || !(UnchangedDocument(*document) == Doc::FromBson(filter))) return std::nullopt;
  return document;
}

}  // namespace remold
