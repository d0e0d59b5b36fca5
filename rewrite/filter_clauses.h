// A query filter as a list of one-key clauses, and back (pure): how the
// patterns take a filter apart to rewrite some of its clauses.
#pragma once

#include <vector>

#include "common/doc.h"

namespace remold {

// The top-level clauses of a filter, each a one-key document, with those
// of top-level $and arrays (of documents only) in their place.
void TopLevelClauses(const bson_t* filter, std::vector<Doc>& out);

// One-key clauses merged into one filter, or under $and when keys repeat.
Doc JoinClauses(std::vector<Doc> clauses);

// {_id: {$in: [the _id of each document]}} (documents without one skipped).
Doc IdIn(const std::vector<Doc>& documents);

}  // namespace remold
