// Fields of checked documents: see bson_fields.h.
#include "bson_fields.h"

#include "bench_mongoc.h"

namespace bench_common {

std::optional<int64_t> int_at(const bson_t* doc, const char* key) {
  bson_iter_t it;
  if (!bson_iter_init_find(&it, doc, key)) return std::nullopt;
  if (BSON_ITER_HOLDS_INT32(&it) || BSON_ITER_HOLDS_INT64(&it)) return bson_iter_as_int64(&it);
  return std::nullopt;
}

std::optional<int64_t> date_at(const bson_t* doc, const char* key) {
  bson_iter_t it;
  if (!bson_iter_init_find(&it, doc, key) || !BSON_ITER_HOLDS_DATE_TIME(&it)) return std::nullopt;
  return bson_iter_date_time(&it);
}

bool same(const bson_t* a, const bson_t* b) { return a && b && bson_equal(a, b); }

std::string json_or_none(const bson_t* doc) { return doc ? to_json(doc) : std::string("(none)"); }

}  // namespace bench_common
