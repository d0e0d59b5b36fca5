#include "patterns/expression/aggregation.h"

#include <vector>

#include "common/doc.h"
#include "rewrite/type_tests.h"

namespace remold {
namespace {

std::string FieldOf(const Expression& e, const std::string& root) { return JsonQuote(root + "." + e.path); }

// `x` when it is a string, null otherwise: an operator never sees another type.
std::string StringOrNull(const std::string& x) {
  return R"({"$cond": [)" + IsString(x) + ", " + x + ", null]}";
}

void Leaves(const Expression& e, const std::string& root, std::vector<std::string>& out) {
  if (e.kind == Expression::Kind::kField) out.push_back(FieldOf(e, root));
  for (const Expression& operand : e.operands) Leaves(operand, root, out);
}

}  // namespace

std::string AggregationOf(const Expression& e, const std::string& root) {
  switch (e.kind) {
    case Expression::Kind::kField: return StringOrNull(FieldOf(e, root));
    case Expression::Kind::kLiteral: return R"({"$literal": )" + JsonQuote(std::get<std::string>(e.literal)) + "}";
    case Expression::Kind::kConcat: {
      std::string operands;
      for (const Expression& operand : e.operands)
        operands += (operands.empty() ? "" : ", ") + AggregationOf(operand, root);
      return R"({"$concat": [)" + operands + "]}";
    }
    case Expression::Kind::kPart:
      return R"({"$ifNull": [{"$arrayElemAt": [{"$split": [)" + AggregationOf(e.operands.at(0), root) + ", " +
             JsonQuote(std::get<std::string>(e.literal)) + "]}, " + std::to_string(e.index) + "]}, null]}";
    default: return "null";
  }
}

std::string StringInputs(const Expression& e, const std::string& root) {
  std::vector<std::string> fields;
  Leaves(e, root, fields);
  std::string tests;
  for (const std::string& field : fields) {
    tests += (tests.empty() ? "" : ", ") + std::string(R"({"$or": [{"$eq": [{"$ifNull": [)") + field +
             R"(, null]}, null]}, )" + IsString(field) + "]}";
  }
  return R"({"$and": [)" + tests + "]}";
}

}  // namespace remold
