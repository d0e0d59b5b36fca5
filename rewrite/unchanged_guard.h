// A filter that matches one document only while it is exactly as it was
// read: the guard of a write that replaces a document with a reshaped copy
// of itself (a migration), so a concurrent change is never overwritten.
//
//   {_id: <its _id>, $expr: {$eq: ["$$ROOT", {$literal: <the document>}]}}
//
// $literal keeps strings that start with '$' from being read as paths.
// Aggregation equality compares numbers by value: a concurrent change of
// a number's type alone (1 to 1.0) is not seen. MongoDB 3.6+.
#pragma once

#include <optional>

#include "common/doc.h"

namespace remold {

Doc UnchangedDocument(const Doc& document);

// The same guard, blind to the order of the document's top-level fields
// (a rule below that stores a document in another shape does not keep
// where each field was):
//   {_id, $expr: {$and: [{$eq: ["$<field>", {$literal: <value>}]}...,
//                        {$eq: [{$size: {$objectToArray: "$$ROOT"}}, <fields>]}]}}
// A document with a field that is not a plain name ('.' or a leading '$')
// gets UnchangedDocument. MongoDB 3.4.4+.
Doc UnchangedFields(const Doc& document);

// The document of a filter that is exactly UnchangedDocument(document)
// (the guard a rule stacked above sends: a rule below turns it into the
// guard of the document as it stores it); nullopt for any other filter.
std::optional<Doc> GuardedDocument(const bson_t* filter);

}  // namespace remold
