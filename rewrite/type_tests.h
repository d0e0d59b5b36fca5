// Aggregation expressions, as Extended JSON text, that test the BSON type of
// a value `x` (itself expression text) by BSON comparison order, since
// $type is missing from the test backend: MinKey < null < numbers <
// strings < documents < arrays < ... Missing and null are neither. Used
// by the views that must not fail on a document of an unexpected shape.
#pragma once

#include <string>

namespace remold {

inline std::string IsString(const std::string& x) {
  return R"({"$and": [{"$gte": [)" + x + R"(, ""]}, {"$lt": [)" + x + R"(, {"$literal": {}}]}]})";
}

inline std::string IsDocument(const std::string& x) {
  return R"({"$and": [{"$gte": [)" + x + R"(, {"$literal": {}}]}, {"$lt": [)" + x +
         R"(, {"$literal": []}]}]})";
}

inline std::string IsNumber(const std::string& x) {
  return R"({"$and": [{"$gt": [)" + x + R"(, null]}, {"$lt": [)" + x + R"(, ""]}]})";
}

}  // namespace remold
