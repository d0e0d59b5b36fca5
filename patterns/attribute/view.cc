#include "patterns/attribute/view.h"

#include <stdexcept>
#include <string>

#include "rewrite/type_tests.h"

namespace remold {
namespace {

std::string Keys(const std::string& object) {
  return R"({"$map": {"input": {"$objectToArray": )" + object + R"(}, "as": "f", "in": "$$f.k"}})";
}

}  // namespace

// Every operator's input below is valid whatever the stored document
// holds, not only on the branch of a $cond that uses it: a server may
// evaluate both branches (DocumentDB does, and failed on $map, $size and
// $allElementsTrue of a missing or non-array field, docs/backends.md).
std::string PairElements(const AttributeRule& rule) {
  const std::string stored = JsonQuote("$" + rule.array_field);
  return R"({"$map": {"input": {"$cond": [{"$isArray": )" + stored + "}, " + stored +
         R"(, {"$literal": []}]}, "as": "e", "in": {"$cond": [)" + IsDocument(R"("$$e")") +
         R"(, "$$e", {"$literal": {}}]}}})";
}

std::vector<Doc> UnfoldStages(const AttributeRule& rule) {
  const std::string stored = JsonQuote("$" + rule.array_field);
  // Every test below reads the elements this way (a non-document as {}, no
  // pair either), so that none meets a value it cannot take.
  const std::string elements = PairElements(rule);
  const std::string key = JsonQuote("$$p." + rule.key_name);
  // Element p (a document) is exactly {key: <string>, value: <any>}.
  const std::string pair_ok = R"({"$and": [)" + IsString(key) +
                              R"(, {"$eq": [{"$size": {"$objectToArray": "$$p"}}, 2]}, )" + R"({"$in": [)" +
                              JsonQuote(rule.value_name) + ", " + Keys(R"("$$p")") + "]}]}";
  const std::string names = R"({"$map": {"input": )" + elements + R"(, "as": "p", "in": )" + key + "}}";
  const std::string unfoldable =
      R"({"$and": [{"$isArray": )" + stored + R"(}, {"$allElementsTrue": [{"$map": {"input": )" + elements +
      R"(, "as": "p", "in": )" + pair_ok + R"(}}]}, {"$eq": [{"$size": {"$setUnion": [)" + names +
      R"(]}}, {"$size": )" + elements + R"(}]}, {"$eq": [{"$size": {"$setIntersection": [)" + names + ", " +
      Keys(R"("$$ROOT")") + "]}}, 0]}]}";
  // The pairs again, filtered: the unfolded document is defined on any
  // stored document, though only used on an unfoldable one.
  const std::string valid_pairs =
      R"({"$filter": {"input": )" + elements + R"(, "as": "p", "cond": )" + pair_ok + "}}";
  std::string pairs = valid_pairs;  // {k, v} already, or renamed to it
  if (rule.key_name != "k" || rule.value_name != "v")
    pairs = R"({"$map": {"input": )" + valid_pairs + R"(, "as": "p", "in": {"k": )" + key + R"(, "v": )" +
            JsonQuote("$$p." + rule.value_name) + "}}}";
  const std::string others = R"({"$filter": {"input": {"$objectToArray": "$$ROOT"}, "as": "f", "cond": )"
                             R"({"$ne": ["$$f.k", {"$literal": )" +
                             JsonQuote(rule.array_field) + "}]}}}";
  const std::string unfolded = R"({"$arrayToObject": {"$concatArrays": [)" + others + ", " + pairs + "]}}";
  const std::string stage = R"({"$replaceRoot": {"newRoot": {"$cond": [)" + unfoldable + ", " + unfolded +
                            R"(, "$$ROOT"]}}})";
  std::string error;
  std::optional<Doc> doc = Doc::FromJson(stage, &error);
  if (!doc) throw std::logic_error("attribute view: " + error);  // the text above is well formed
  return {std::move(*doc)};
}

}  // namespace remold
