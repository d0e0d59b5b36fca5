// Values `remold reconcile` compares: a stored field against the value
// recomputed from the source data.
//
// Value owns one BSON value of any type. Holds() decides whether a stored
// field holds an expected value the way the write path's maintenance would
// have left it: numbers by value across int32/int64/double (HoldsValue in
// patterns/expression/evaluate.h), null as "absent" (missing or null), other
// types exactly. Describe() and Difference() render values for the report;
// LinkKey() groups link values as MongoDB's $group and equality do (1, 1L
// and 1.0 are one link).
//
// Pure: no I/O.
#pragma once

#include <bson/bson.h>

#include <optional>
#include <string>
#include <string_view>

#include "common/doc.h"
#include "patterns/expression/evaluate.h"

namespace remold {

class Value {
 public:
  Value();  // null
  static Value Of(const bson_iter_t& element);
  static Value Of(const ComputedValue& value);
  static Value Int32(int32_t number);

  // An iterator positioned on the value.
  bson_iter_t iter() const;
  bool is_null() const;
  void AppendTo(bson_t* out, std::string_view key) const;

  // Exact equality: same BSON type and bytes.
  bool operator==(const Value& other) const { return holder_ == other.holder_; }

 private:
  explicit Value(Doc holder);
  Doc holder_;  // {"v": value}
};

// Whether `stored` (nullptr: the field is missing) holds `expected`.
bool Holds(const bson_iter_t* stored, const Value& expected);

// A value for people: 7, 4.5, "text", null, true, 2026-01-02T03:04:05.678Z,
// relaxed Extended JSON for the rest; "missing" for nullptr.
std::string Describe(const bson_iter_t* value);
std::string Describe(const Value& value);

// observed - expected, signed ("+2", "-0.5"), when both are numbers.
std::optional<std::string> Difference(const bson_iter_t* observed, const Value& expected);

// A key equal for link values MongoDB groups and matches as equal.
std::string LinkKey(const bson_iter_t& value);

}  // namespace remold
