#include "rewrite/filter_clauses.h"

#include <set>
#include <string>
#include <string_view>

namespace remold {
namespace {

// Whether `array` holds documents, one at least, and nothing else: an $and
// the server accepts (another stays as written, for the server to refuse).
bool AllDocuments(const bson_iter_t& array) {
  bson_iter_t copy = array, child;
  if (!bson_iter_recurse(&copy, &child)) return false;
  bool any = false;
  while (bson_iter_next(&child)) {
    if (!BSON_ITER_HOLDS_DOCUMENT(&child)) return false;
    any = true;
  }
  return any;
}

}  // namespace

void TopLevelClauses(const bson_t* filter, std::vector<Doc>& out) {
  bson_iter_t it;
  if (!bson_iter_init(&it, filter)) return;
  while (bson_iter_next(&it)) {
    if (std::string_view(bson_iter_key(&it)) == "$and" && BSON_ITER_HOLDS_ARRAY(&it) && AllDocuments(it)) {
      for (const Doc& clause : ArrayDocuments(it)) TopLevelClauses(clause.get(), out);
      continue;
    }
    Doc clause;
    AppendValue(clause.mut(), bson_iter_key(&it), it);
    out.push_back(std::move(clause));
  }
}

Doc IdIn(const std::vector<Doc>& documents) {
  Doc in, by_id;
  bson_t array;
  BSON_APPEND_ARRAY_BEGIN(in.mut(), "$in", &array);
  size_t i = 0;
  for (const Doc& document : documents) {
    bson_iter_t id;
    if (bson_iter_init_find(&id, document.get(), "_id")) AppendValue(&array, std::to_string(i++), id);
  }
  bson_append_array_end(in.mut(), &array);
  AppendDoc(by_id.mut(), "_id", in);
  return by_id;
}

Doc JoinClauses(std::vector<Doc> clauses) {
  std::set<std::string> keys;
  bool distinct = true;
  for (const Doc& clause : clauses) {
    bson_iter_t it;
    bson_iter_init(&it, clause.get());
    while (bson_iter_next(&it)) distinct = keys.insert(bson_iter_key(&it)).second && distinct;
  }
  Doc out;
  if (distinct) {
    for (const Doc& clause : clauses) bson_concat(out.mut(), clause.get());
  } else {
    AppendArray(out.mut(), "$and", clauses);
  }
  return out;
}

}  // namespace remold
