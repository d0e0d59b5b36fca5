// An expression (expression.h) as an aggregation expression, in Extended
// JSON text, over the document in the variable `root` ("$$ROOT", "$$d"):
// how a read computes on the server what Evaluate (evaluate.h) computes in
// C++. Only the string operators are written so (concat, part, over fields
// and string literals), where the two agree exactly on every document for
// which StringInputs holds; the caller checks it first.
#pragma once

#include <string>

#include "patterns/expression/expression.h"

namespace remold {

// The value of `e`, made of concat, part, fields and string literals. Never fails on the server: an
// operand that is not a string is read as null.
std::string AggregationOf(const Expression& e, const std::string& root);

// True when every field `e` reads is a string, null or missing.
std::string StringInputs(const Expression& e, const std::string& root);

}  // namespace remold
