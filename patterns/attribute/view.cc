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

std::vector<Doc> UnfoldStages(const AttributeRule& rule) {
  const std::string array = JsonQuote("$" + rule.array_field);
  const std::string key = JsonQuote("$$p." + rule.key_name);
  // Element p is exactly {key: <string>, value: <any>}.
  const std::string pair_ok = R"({"$cond": [)" + IsDocument(R"("$$p")") + R"(, {"$and": [)" +
                              IsString(key) + R"(, {"$eq": [{"$size": {"$objectToArray": "$$p"}}, 2]}, )" +
                              R"({"$in": [)" + JsonQuote(rule.value_name) + ", " + Keys(R"("$$p")") +
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
