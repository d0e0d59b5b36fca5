#include "patterns/attribute/view.h"

#include <cstdio>
#include <stdexcept>
#include <string>

namespace remold {
namespace {

// A JSON string literal.
std::string Quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// Whether `x` is a string / a document, by BSON comparison order (the
// test backend has no $type): strings sort from "" up to the first
// document, documents from {} up to the first array.
std::string IsString(const std::string& x) {
  return R"({"$and": [{"$gte": [)" + x + R"(, ""]}, {"$lt": [)" + x + R"(, {"$literal": {}}]}]})";
}
std::string IsDocument(const std::string& x) {
  return R"({"$and": [{"$gte": [)" + x + R"(, {"$literal": {}}]}, {"$lt": [)" + x +
         R"(, {"$literal": []}]}]})";
}

std::string Keys(const std::string& object) {
  return R"({"$map": {"input": {"$objectToArray": )" + object + R"(}, "as": "f", "in": "$$f.k"}})";
}

}  // namespace

std::vector<Doc> UnfoldStages(const AttributeRule& rule) {
  const std::string array = Quote("$" + rule.array_field);
  const std::string key = Quote("$$p." + rule.key_name);
  // Element p is exactly {key: <string>, value: <any>}.
  const std::string pair_ok = R"({"$cond": [)" + IsDocument(R"("$$p")") + R"(, {"$and": [)" +
                              IsString(key) + R"(, {"$eq": [{"$size": {"$objectToArray": "$$p"}}, 2]}, )" +
                              R"({"$in": [)" + Quote(rule.value_name) + ", " + Keys(R"("$$p")") +
                              R"(]}]}, false]})";
  const std::string names = R"({"$map": {"input": )" + array + R"(, "as": "p", "in": )" + key + "}}";
  const std::string unfoldable =
      R"({"$cond": [{"$isArray": )" + array + R"(}, {"$cond": [{"$allElementsTrue": [{"$map": {"input": )" +
      array + R"(, "as": "p", "in": )" + pair_ok + R"(}}]}, {"$and": [{"$eq": [{"$size": {"$setUnion": [)" +
      names + R"(]}}, {"$size": )" + array + R"(}]}, {"$eq": [{"$size": {"$setIntersection": [)" + names +
      ", " + Keys(R"("$$ROOT")") + R"(]}}, 0]}]}, false]}, false]})";
  // The pairs again, filtered so that this branch is defined on any
  // document: a server may evaluate both branches of the $cond below.
  const std::string valid_pairs = R"({"$filter": {"input": {"$cond": [{"$isArray": )" + array +
                                  "}, " + array + R"(, {"$literal": []}]}, "as": "p", "cond": )" +
                                  pair_ok + "}}";
  std::string pairs = valid_pairs;  // {k, v} already, or renamed to it
  if (rule.key_name != "k" || rule.value_name != "v")
    pairs = R"({"$map": {"input": )" + valid_pairs + R"(, "as": "p", "in": {"k": )" + key + R"(, "v": )" +
            Quote("$$p." + rule.value_name) + "}}}";
  const std::string others = R"({"$filter": {"input": {"$objectToArray": "$$ROOT"}, "as": "f", "cond": )"
                             R"({"$ne": ["$$f.k", {"$literal": )" +
                             Quote(rule.array_field) + "}]}}}";
  const std::string unfolded = R"({"$arrayToObject": {"$concatArrays": [)" + others + ", " + pairs + "]}}";
  const std::string stage = R"({"$replaceRoot": {"newRoot": {"$cond": [)" + unfoldable + ", " + unfolded +
                            R"(, "$$ROOT"]}}})";
  std::string error;
  std::optional<Doc> doc = Doc::FromJson(stage, &error);
  if (!doc) throw std::logic_error("attribute view: " + error);  // the text above is well formed
  return {std::move(*doc)};
}

}  // namespace remold
