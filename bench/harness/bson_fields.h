// bson_fields: what the pattern benches read of a document they check, and
// how they compare and show one.
//
// Contract:
//   - int_at() is the int32 or int64 at a top-level key, date_at() the
//     date; std::nullopt when the key is missing or holds another type.
//   - same() is true when both documents exist and are equal byte for byte.
//   - json_or_none() is the document as JSON, "(none)" for nullptr.
#pragma once

#include <bson/bson.h>

#include <cstdint>
#include <optional>
#include <string>

namespace bench_common {

std::optional<int64_t> int_at(const bson_t* doc, const char* key);
std::optional<int64_t> date_at(const bson_t* doc, const char* key);
bool same(const bson_t* a, const bson_t* b);
std::string json_or_none(const bson_t* doc);

}  // namespace bench_common
