#include "rewrite/unchanged_guard.h"

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

}  // namespace remold
