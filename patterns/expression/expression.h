// The expression language rules share: computed fields (patterns/computed)
// and the upgrade steps of versioned documents (patterns/versioned) use
// it. This header is the value and its parser; evaluate.h evaluates it in
// C++ and aggregation.h writes it as an aggregation expression.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <variant>
#include <vector>

namespace YAML {
class Node;
}

namespace remold {

class FileContext;

// An expression over one document (see docs/patterns/computed.md, "Expressions"). A
// field path names a field of the document, or of the array element
// inside `each`.
struct Expression {
  enum class Kind {
    kField,    // the value at `path`
    kLiteral,  // `literal`
    kSum,      // numbers among the operands added; others ignored ($sum)
    kProduct,  // operands multiplied; null if any is null or missing ($multiply)
    kDivide,   // operands[0] / operands[1]; null if either is null or the divisor 0
    kCount,    // the number of elements of the array at `path`; 0 if missing
    kMin,      // the least non-null operand ($min)
    kMax,      // the greatest non-null operand ($max)
    kConcat,   // strings joined; null if any is null or missing ($concat)
    kEach,     // operands[0] evaluated on each element of the array at `path`
    kPart,     // piece `index` of string operands[0] split at `literal`
               // ($split, $arrayElemAt; negative counts from the end); null
               // if the operand is null or missing, or there is no such piece
  };
  using Literal = std::variant<std::monostate, bool, int64_t, double, std::string>;

  Kind kind = Kind::kLiteral;
  std::string path;
  Literal literal;
  std::vector<Expression> operands;
  int64_t index = 0;  // kPart
};

// Parses an expression of a rule file, reporting mistakes to `ctx`, and
// adds the top-level fields of the document it reads to `inputs`.
Expression ParseExpression(const FileContext& ctx, const YAML::Node& node,
                           std::set<std::string>& inputs);

}  // namespace remold
