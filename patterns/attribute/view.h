// The attribute pattern's view: the aggregation stages that present stored
// documents as the application wrote them (pure).
//
// A document is unfolded, its pairs becoming top-level fields after its
// other fields and the array dropped, only when the array holds nothing
// but exact {<key>: <string>, <value>: <any>} pairs whose names are
// distinct and differ from the document's own fields; any other document
// (array missing, not an array, an element that is not such a pair, a name
// that repeats or clashes) is passed on exactly as stored. This is what
// UnfoldAttributes (filter.h) does to a find reply, so find and aggregate
// agree, and one malformed document written behind remold's back cannot
// fail the reads of the collection. Only operators of MongoDB 4.2 (and of
// the test backend) are used.
#pragma once

#include <string>
#include <vector>

#include "common/doc.h"
#include "patterns/attribute/rule.h"

namespace remold {

std::vector<Doc> UnfoldStages(const AttributeRule& rule);

// The pair array's elements as an expression (Extended JSON text), each one
// that is not a document as {}, or [] when the field is missing or holds
// no array: what an expression over the pairs reads, so that it meets no
// value it cannot take.
std::string PairElements(const AttributeRule& rule);

}  // namespace remold
