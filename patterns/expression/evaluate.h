// Evaluating an expression (expression.h) over one BSON document: the way
// remold computes `total` from `items` before a write, `remold reconcile`
// recomputes it afterwards, and a versioned rule's upgrade computes a field.
//
// Semantics follow MongoDB's aggregation operators of the same names:
//   sum      numbers added; non-numbers ignored; int32 -> int64 -> double
//            as the result needs; empty -> 0 (int32)
//   product  numbers multiplied; null if an operand is null or missing
//   divide   a double; null if either side is null/missing or the divisor 0
//   count    the number of elements of an array; 0 when missing
//   min/max  the least/greatest operand by BSON order, null and missing
//            ignored; null when nothing is left
//   concat   strings joined; null if an operand is null or missing
//   each     the inner expression evaluated on every element of an array
//   part     one piece of a string split at a separator ($split, then
//            $arrayElemAt); null if the string is null or missing, or the
//            piece does not exist
// An operand that is an array (a field holding one, or `each`) contributes
// each of its elements. A type that cannot take part (a string in a
// product, a number in a concat, a decimal128 anywhere arithmetic happens)
// is an error, reported with the field's name.
//
// Pure: no I/O, no globals.
#pragma once

#include <bson/bson.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "patterns/expression/expression.h"

namespace remold {

// A BSON date, in milliseconds since the epoch.
struct DateMs {
  int64_t ms = 0;
  bool operator==(const DateMs&) const = default;
};

// The value of an expression. monostate is null.
using ComputedValue = std::variant<std::monostate, bool, int32_t, int64_t, double, std::string, DateMs>;

struct EvaluationError {
  std::string message;  // e.g. "'price' is a string, expected a number"
};

// The value of `expression` over `document`, or why there is none.
std::variant<ComputedValue, EvaluationError> Evaluate(const Expression& expression,
                                                      const bson_t* document);

// The value of a stored BSON element as a ComputedValue, when it is of a
// type expressions produce (documents, arrays, ObjectIds... are not).
std::optional<ComputedValue> ValueOf(const bson_iter_t* element);

// Appends `value` to `out` under `key` (null as BSON null).
void AppendComputedValue(bson_t* out, std::string_view key, const ComputedValue& value);

// Whether a stored element holds `value`: numbers compare by value across
// int32/int64/double (doubles within a relative 1e-9, as sums of doubles
// depend on the order they were added in); other types exactly. A missing
// element (nullptr) holds null only.
bool HoldsValue(const bson_iter_t* stored, const ComputedValue& value);

// The value for messages: 42, 4.5, "text", null, true, Date(1700000000000).
std::string DescribeValue(const ComputedValue& value);

}  // namespace remold
