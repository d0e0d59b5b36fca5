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

#include "common/doc.h"

namespace remold {

Doc UnchangedDocument(const Doc& document);

}  // namespace remold
