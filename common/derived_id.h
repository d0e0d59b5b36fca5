// An ObjectId that is a function of a seed alone (two FNV-1a hashes of
// it): the _id of a document remold writes that the same write, replayed,
// must write again under the same _id (a migrated batch, a page of an
// outlier's overflow). Not random: distinct seeds give distinct ids with
// the odds of a 96-bit hash.
#pragma once

#include <bson/bson.h>

#include <string_view>

namespace remold {

bson_oid_t DerivedObjectId(std::string_view seed);

// {key: DerivedObjectId(seed)} appended to `out`.
void AppendDerivedId(bson_t* out, const char* key, std::string_view seed);

}  // namespace remold
