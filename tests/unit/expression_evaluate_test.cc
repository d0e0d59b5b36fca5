// Unit tests of computed-field expressions (patterns/expression/evaluate.h).
// Expressions are made the real way: a rule file's text through the loader.
#include "patterns/expression/evaluate.h"

#include <gtest/gtest.h>

#include <cmath>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <utility>

#include "ruleset/loader.h"

namespace remold {

// Found by ADL (DateMs is in remold), so failures print type and value.
void PrintTo(const ComputedValue& value, std::ostream* os) {
  static const char* kTypes[] = {"null", "bool", "int32", "int64", "double", "string", "date"};
  *os << kTypes[value.index()] << " " << DescribeValue(value);
}

namespace {

// An owned bson_t* (unique_ptr<bson_t> warns: bson_t is over-aligned).
class Json {
 public:
  explicit Json(bson_t* doc) : doc_(doc) {}
  Json(Json&& other) noexcept : doc_(std::exchange(other.doc_, nullptr)) {}
  Json& operator=(Json&&) = delete;
  ~Json() {
    if (doc_) bson_destroy(doc_);
  }
  bson_t* get() const { return doc_; }

 private:
  bson_t* doc_;
};

// A document from (relaxed or canonical) Extended JSON.
Json Parse(const std::string& json) {
  bson_error_t error;
  bson_t* doc = bson_new_from_json(reinterpret_cast<const uint8_t*>(json.data()),
                                   static_cast<ssize_t>(json.size()), &error);
  EXPECT_NE(doc, nullptr) << "bad JSON in the test: " << error.message << "\n" << json;
  return Json(doc ? doc : bson_new());
}

// The rule of `fields` (YAML lines under `fields:`, indented four spaces).
std::shared_ptr<const RuleSet> LoadFields(const std::string& fields) {
  std::string text =
      "namespace: shop.orders\npattern: computed\ncomputed:\n  fields:\n" + fields +
      "  on_client_write: reject\n";
  RuleLoadResult result = LoadRuleText(text, "orders.yaml");
  EXPECT_TRUE(result.errors.empty()) << result.errors.front() << "\n" << text;
  return result.rules;
}

// Keeps the rule set alive while its expression is used.
struct Loaded {
  std::shared_ptr<const RuleSet> rules;
  const Expression* expression = nullptr;
};

// The expression of one computed field `out: <yaml>`.
Loaded Expr(const std::string& yaml) {
  Loaded loaded;
  loaded.rules = LoadFields("    out: " + yaml + "\n");
  if (!loaded.rules) return loaded;
  const auto& rule = std::get<ComputedRule>(loaded.rules->rules().at(0).pattern);
  loaded.expression = &rule.fields.at(0).expression;
  return loaded;
}

std::variant<ComputedValue, EvaluationError> Run(const std::string& yaml, const std::string& json) {
  Loaded loaded = Expr(yaml);
  if (!loaded.expression) return EvaluationError{"the rule did not load"};
  Json doc = Parse(json);
  return Evaluate(*loaded.expression, doc.get());
}

// The value of `yaml` over `json`; a failure if it is an error.
ComputedValue Value(const std::string& yaml, const std::string& json) {
  auto result = Run(yaml, json);
  if (auto* error = std::get_if<EvaluationError>(&result)) {
    ADD_FAILURE() << yaml << " over " << json << ": unexpected error: " << error->message;
    return ComputedValue{std::string("<error>")};
  }
  return std::get<ComputedValue>(result);
}

// The error of `yaml` over `json`; a failure if it has a value.
std::string Error(const std::string& yaml, const std::string& json) {
  auto result = Run(yaml, json);
  if (auto* value = std::get_if<ComputedValue>(&result)) {
    ADD_FAILURE() << yaml << " over " << json << ": expected an error, got "
                  << DescribeValue(*value);
    return "";
  }
  return std::get<EvaluationError>(result).message;
}

const ComputedValue kNull = std::monostate{};

ComputedValue I32(int32_t v) { return v; }
ComputedValue I64(int64_t v) { return v; }
ComputedValue D(double v) { return v; }
ComputedValue S(std::string v) { return v; }

constexpr int32_t kI32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();

// ---------------------------------------------------------------------------
// The rule of the README, end to end

TEST(ComputedExpression, OrderRuleEndToEnd) {
  auto rules = LoadFields(
      "    total: {sum: {each: items, of: {product: [price, qty]}}}\n"
      "    itemCount: {count: items}\n"
      "    label: {concat: [first, {literal: \" \"}, last]}\n"
      "    top: {max: {each: items, of: price}}\n"
      "    avg: {divide: [sum, n]}\n");
  ASSERT_TRUE(rules);
  const auto& rule = std::get<ComputedRule>(rules->rules().at(0).pattern);
  ASSERT_EQ(rule.fields.size(), 5u);
  Json doc = Parse(R"({"first": "Ada", "last": "Lovelace", "sum": 9, "n": 2,
                       "items": [{"price": 2.5, "qty": 4}, {"price": 10, "qty": 3},
                                 {"price": 1, "qty": 1}]})");
  std::map<std::string, ComputedValue> got;
  for (const auto& field : rule.fields) {
    auto result = Evaluate(field.expression, doc.get());
    ASSERT_TRUE(std::holds_alternative<ComputedValue>(result))
        << field.field << ": " << std::get<EvaluationError>(result).message;
    got[field.field] = std::get<ComputedValue>(result);
  }
  EXPECT_EQ(got["total"], D(41.0));  // 10.0 + 30 + 1: a double once a price is
  EXPECT_EQ(got["itemCount"], I32(3));
  EXPECT_EQ(got["label"], S("Ada Lovelace"));
  EXPECT_EQ(got["top"], I32(10));
  EXPECT_EQ(got["avg"], D(4.5));
}

// ---------------------------------------------------------------------------
// Field paths and literals

TEST(ComputedExpression, FieldKeepsItsType) {
  EXPECT_EQ(Value("a", R"({"a": 5})"), I32(5));
  EXPECT_EQ(Value("a", R"({"a": {"$numberLong": "5"}})"), I64(5));
  EXPECT_EQ(Value("a", R"({"a": 5.5})"), D(5.5));
  EXPECT_EQ(Value("a", R"({"a": "x"})"), S("x"));
  EXPECT_EQ(Value("a", R"({"a": true})"), ComputedValue{true});
  EXPECT_EQ(Value("a", R"({"a": {"$date": {"$numberLong": "1700000000000"}}})"),
            ComputedValue{DateMs{1700000000000}});
  EXPECT_EQ(Value("a", R"({"a": null})"), kNull);
  EXPECT_EQ(Value("a", R"({"b": 1})"), kNull);  // missing
  EXPECT_EQ(Value("a", R"({"a": {"$undefined": true}})"), kNull);
}

TEST(ComputedExpression, DottedPathsTraverseDocuments) {
  EXPECT_EQ(Value("a.b.c", R"({"a": {"b": {"c": 7}}})"), I32(7));
  EXPECT_EQ(Value("a.b.c", R"({"a": {"b": 1}})"), kNull);  // through a scalar: missing
  EXPECT_EQ(Value("a.b.c", R"({"a": {"x": {"c": 1}}})"), kNull);
  EXPECT_EQ(Value("a.b", R"({"a": "text"})"), kNull);
  // The first of duplicate keys, as libbson finds it.
  EXPECT_EQ(Value("a", R"({"a": 1, "a": 2})"), I32(1));
}

TEST(ComputedExpression, TopLevelFieldMustBeASingleValue) {
  EXPECT_EQ(Error("items", R"({"items": [1, 2]})"), "'items' is an array, expected a single value");
  EXPECT_EQ(Error("items.price", R"({"items": [{"price": 1}]})"),
            "'items.price' is an array, expected a single value");
  // Even when the array has nothing in it.
  EXPECT_EQ(Error("items.price", R"({"items": []})"),
            "'items.price' is an array, expected a single value");
  EXPECT_EQ(Error("a", R"({"a": {"b": 1}})"), "'a' is a document, expected a single value");
  EXPECT_EQ(Error("a", R"({"a": {"$oid": "5f1d7f3e9d3b2a0001a1b2c3"}})"),
            "'a' is an ObjectId, expected a number, string, boolean, date or null");
  EXPECT_EQ(Error("a", R"({"a": {"$numberDecimal": "1.5"}})"),
            "'a' is a decimal128; decimal128 is not supported in computed fields");
}

TEST(ComputedExpression, Literals) {
  EXPECT_EQ(Value("5", "{}"), I32(5));  // small YAML integers are int32
  EXPECT_EQ(Value("-7", "{}"), I32(-7));
  EXPECT_EQ(Value("5000000000", "{}"), I64(5000000000));
  EXPECT_EQ(Value("2.5", "{}"), D(2.5));
  EXPECT_EQ(Value("{literal: \"5\"}", "{}"), S("5"));  // quoted: a string
  EXPECT_EQ(Value("{literal: text}", "{}"), S("text"));
  EXPECT_EQ(Value("{literal: true}", "{}"), ComputedValue{true});
  EXPECT_EQ(Value("{literal: false}", "{}"), ComputedValue{false});
  EXPECT_EQ(Value("{literal: null}", "{}"), kNull);
  EXPECT_EQ(Value("{literal: 3}", "{}"), I32(3));
  // A plain scalar that is not a number is a field path.
  EXPECT_EQ(Value("x1", R"({"x1": "field"})"), S("field"));
}

// ---------------------------------------------------------------------------
// sum

TEST(ComputedExpression, SumTypes) {
  EXPECT_EQ(Value("{sum: [a, b]}", R"({"a": 1, "b": 2})"), I32(3));
  EXPECT_EQ(Value("{sum: [a, b]}", R"({"a": 2147483647, "b": 1})"), I64(2147483648LL));
  EXPECT_EQ(Value("{sum: [a, b]}", R"({"a": -2147483648, "b": -1})"), I64(-2147483649LL));
  // int32 + int64 is int64 even when it would fit.
  EXPECT_EQ(Value("{sum: [a, b]}", R"({"a": 1, "b": {"$numberLong": "2"}})"), I64(3));
  // Once int64, stays int64.
  EXPECT_EQ(Value("{sum: [a, b, c]}", R"({"a": 2147483647, "b": 1, "c": -5})"),
            I64(2147483643LL));
  // int64 overflow: double.
  EXPECT_EQ(Value("{sum: [a, b]}", R"({"a": {"$numberLong": "9223372036854775807"}, "b": 1})"),
            D(9223372036854775808.0));
  EXPECT_EQ(Value("{sum: [a, b]}",
                  R"({"a": {"$numberLong": "-9223372036854775808"}, "b": {"$numberLong": "-1"}})"),
            D(-9223372036854775809.0));
  // Any double: double.
  EXPECT_EQ(Value("{sum: [a, b]}", R"({"a": 1, "b": 0.5})"), D(1.5));
  EXPECT_EQ(Value("{sum: [a, b]}", R"({"a": 0.5, "b": {"$numberLong": "2"}})"), D(2.5));
  EXPECT_EQ(Value("{sum: [a, b]}", R"({"a": 1.0, "b": 2})"), D(3.0));
  // Literals take part: small ones as int32.
  EXPECT_EQ(Value("{sum: [a, 1]}", R"({"a": 1})"), I32(2));
  EXPECT_EQ(Value("{sum: a}", R"({"a": 4})"), I32(4));  // one operand, not a list
}

TEST(ComputedExpression, SumIgnoresNonNumbers) {
  EXPECT_EQ(Value("{sum: [a, b, c, d, e, f, g]}",
                  R"({"a": 1, "b": "2", "c": true, "d": null, "e": {"x": 1},
                      "f": {"$date": {"$numberLong": "5"}}, "g": {"$oid": "5f1d7f3e9d3b2a0001a1b2c3"}})"),
            I32(1));
  EXPECT_EQ(Value("{sum: [a, b]}", "{}"), I32(0));  // all missing
  EXPECT_EQ(Value("{sum: a}", R"({"a": "x"})"), I32(0));
  EXPECT_EQ(Value("{sum: a}", R"({"a": []})"), I32(0));  // empty
  EXPECT_EQ(Value("{sum: a}", R"({"a": false})"), I32(0));  // bool is not a number
}

TEST(ComputedExpression, SumSpreadsArrays) {
  EXPECT_EQ(Value("{sum: scores}", R"({"scores": [1, 2, 3]})"), I32(6));
  EXPECT_EQ(Value("{sum: [scores, 10]}", R"({"scores": [1, 2, "x", null]})"), I32(13));
  EXPECT_EQ(Value("{sum: items.price}", R"({"items": [{"price": 1}, {"price": 2.5}, {"x": 9}, 7]})"),
            D(3.5));
  // Nested arrays contribute their elements too.
  EXPECT_EQ(Value("{sum: m}", R"({"m": [[1, 2], [3, [4]]]})"), I32(10));
  // A path through two arrays.
  EXPECT_EQ(Value("{sum: orders.items.qty}",
                  R"({"orders": [{"items": [{"qty": 1}, {"qty": 2}]}, {"items": [{"qty": 3}]},
                                 {"items": {"qty": 4}}]})"),
            I32(10));
}

TEST(ComputedExpression, SumRefusesDecimal) {
  EXPECT_EQ(Error("{sum: [a, price]}", R"({"a": 1, "price": {"$numberDecimal": "1.5"}})"),
            "'price' is a decimal128; decimal128 is not supported in computed fields");
  EXPECT_EQ(Error("{sum: items.price}", R"({"items": [{"price": {"$numberDecimal": "1"}}]})"),
            "'items.price' is a decimal128; decimal128 is not supported in computed fields");
}

// ---------------------------------------------------------------------------
// product

TEST(ComputedExpression, ProductTypes) {
  EXPECT_EQ(Value("{product: [price, qty]}", R"({"price": 3, "qty": 4})"), I32(12));
  EXPECT_EQ(Value("{product: [a, b]}", R"({"a": 65536, "b": 65536})"), I64(4294967296LL));
  EXPECT_EQ(Value("{product: [a, b]}", R"({"a": 2, "b": {"$numberLong": "3"}})"), I64(6));
  EXPECT_EQ(Value("{product: [a, b]}", R"({"a": {"$numberLong": "4611686018427387904"}, "b": 4})"),
            D(18446744073709551616.0));
  EXPECT_EQ(Value("{product: [a, b]}", R"({"a": 2, "b": 1.5})"), D(3.0));
  EXPECT_EQ(Value("{product: [a, 2]}", R"({"a": 2147483647})"), I64(4294967294LL));
  EXPECT_EQ(Value("{product: [a, -1]}", R"({"a": -2147483648})"), I64(2147483648LL));
  EXPECT_EQ(Value("{product: a}", R"({"a": [2, 3, 4]})"), I32(24));  // spread
  EXPECT_EQ(Value("{product: a}", R"({"a": []})"), I32(1));          // empty
}

TEST(ComputedExpression, ProductNullWhenAnOperandIsNullOrMissing) {
  EXPECT_EQ(Value("{product: [price, qty]}", R"({"price": 3})"), kNull);
  EXPECT_EQ(Value("{product: [price, qty]}", R"({"price": 3, "qty": null})"), kNull);
  EXPECT_EQ(Value("{product: a}", R"({"a": [2, null]})"), kNull);
  EXPECT_EQ(Value("{product: a}", "{}"), kNull);
}

TEST(ComputedExpression, ProductErrors) {
  EXPECT_EQ(Error("{product: [price, qty]}", R"({"price": 3, "qty": "4"})"),
            "'qty' is a string, expected a number");
  EXPECT_EQ(Error("{product: [price, qty]}", R"({"price": true, "qty": 4})"),
            "'price' is a boolean, expected a number");
  EXPECT_EQ(Error("{product: [price, qty]}", R"({"price": {"a": 1}, "qty": 4})"),
            "'price' is a document, expected a number");
  EXPECT_EQ(Error("{product: [price, {literal: x}]}", R"({"price": 1})"),
            "the literal \"x\" is a string, expected a number");
  EXPECT_EQ(Error("{product: [price, {concat: [a]}]}", R"({"price": 1, "a": "s"})"),
            "the concatenation is a string, expected a number");
  // A type error wins over a null, whatever the order.
  EXPECT_EQ(Error("{product: [price, qty]}", R"({"price": null, "qty": "4"})"),
            "'qty' is a string, expected a number");
  EXPECT_EQ(Error("{product: [price, qty]}", R"({"price": 2, "qty": {"$numberDecimal": "4"}})"),
            "'qty' is a decimal128; decimal128 is not supported in computed fields");
}

// ---------------------------------------------------------------------------
// divide

TEST(ComputedExpression, Divide) {
  EXPECT_EQ(Value("{divide: [a, b]}", R"({"a": 5, "b": 2})"), D(2.5));
  EXPECT_EQ(Value("{divide: [a, b]}", R"({"a": 6, "b": 3})"), D(2.0));  // always a double
  EXPECT_EQ(Value("{divide: [a, b]}", R"({"a": {"$numberLong": "9"}, "b": 1.5})"), D(6.0));
  EXPECT_EQ(Value("{divide: [a, 4]}", R"({"a": 1})"), D(0.25));
  EXPECT_EQ(Value("{divide: [a, b]}", R"({"a": 1, "b": null})"), kNull);
  EXPECT_EQ(Value("{divide: [a, b]}", R"({"b": 1})"), kNull);
  EXPECT_EQ(Value("{divide: [a, b]}", R"({"a": 1})"), kNull);
  EXPECT_EQ(Value("{divide: [a, b]}", R"({"a": 1, "b": 0})"), kNull);
  EXPECT_EQ(Value("{divide: [a, b]}", R"({"a": 1, "b": 0.0})"), kNull);
  EXPECT_EQ(Value("{divide: [a, b]}", R"({"a": 1, "b": -0.0})"), kNull);
  EXPECT_EQ(Value("{divide: [a, b]}", R"({"a": 1, "b": {"$numberLong": "0"}})"), kNull);
  EXPECT_EQ(Value("{divide: [a, b]}", R"({"a": 0, "b": 0})"), kNull);
}

TEST(ComputedExpression, DivideErrors) {
  EXPECT_EQ(Error("{divide: [a, b]}", R"({"a": "1", "b": 2})"), "'a' is a string, expected a number");
  EXPECT_EQ(Error("{divide: [a, b]}", R"({"a": 1, "b": true})"), "'b' is a boolean, expected a number");
  EXPECT_EQ(Error("{divide: [a, b]}", R"({"a": "1", "b": 0})"), "'a' is a string, expected a number");
  EXPECT_EQ(Error("{divide: [a, b]}", R"({"a": 1, "b": [2]})"), "'b' is an array, expected a number");
  EXPECT_EQ(Error("{divide: [a, b]}", R"({"a": {"$numberDecimal": "1"}, "b": 2})"),
            "'a' is a decimal128; decimal128 is not supported in computed fields");
}

// ---------------------------------------------------------------------------
// count

TEST(ComputedExpression, Count) {
  EXPECT_EQ(Value("{count: items}", R"({"items": [1, "a", null, {}]})"), I32(4));
  EXPECT_EQ(Value("{count: items}", R"({"items": []})"), I32(0));
  EXPECT_EQ(Value("{count: items}", "{}"), I32(0));
  EXPECT_EQ(Value("{count: items}", R"({"items": null})"), I32(0));
  EXPECT_EQ(Value("{count: a.items}", R"({"a": {"items": [1, 2]}})"), I32(2));
  // Through an array: the values found, as $size of "$orders.items" counts.
  EXPECT_EQ(Value("{count: orders.items}",
                  R"({"orders": [{"items": [1, 2]}, {"x": 1}, {"items": [3]}]})"),
            I32(2));
  EXPECT_EQ(Value("{sum: [{count: a}, {count: b}]}", R"({"a": [1], "b": [1, 2]})"), I32(3));
}

TEST(ComputedExpression, CountErrors) {
  EXPECT_EQ(Error("{count: items}", R"({"items": 3})"), "'items' is a number, expected an array");
  EXPECT_EQ(Error("{count: items}", R"({"items": {"a": 1}})"),
            "'items' is a document, expected an array");
  EXPECT_EQ(Error("{count: items}", R"({"items": "abc"})"), "'items' is a string, expected an array");
}

// ---------------------------------------------------------------------------
// min and max

TEST(ComputedExpression, MinMaxNumbersKeepTheWinnersType) {
  const char* doc = R"({"a": 3, "b": {"$numberLong": "7"}, "c": 5.5})";
  EXPECT_EQ(Value("{min: [a, b, c]}", doc), I32(3));
  EXPECT_EQ(Value("{max: [a, b, c]}", doc), I64(7));
  EXPECT_EQ(Value("{max: [a, c]}", doc), D(5.5));
  EXPECT_EQ(Value("{min: [c, b]}", doc), D(5.5));
  EXPECT_EQ(Value("{min: a}", doc), I32(3));
  // Exact across int64 and double: 2^53 + 1 is above the double 2^53.
  const char* big = R"({"i": {"$numberLong": "9007199254740993"}, "d": 9007199254740992.0})";
  EXPECT_EQ(Value("{max: [d, i]}", big), I64(9007199254740993LL));
  EXPECT_EQ(Value("{min: [i, d]}", big), D(9007199254740992.0));
  EXPECT_EQ(Value("{max: [i, d]}", R"({"i": {"$numberLong": "-9223372036854775808"}, "d": -1e300})"),
            I64(std::numeric_limits<int64_t>::min()));
  EXPECT_EQ(Value("{min: [i, d]}", R"({"i": {"$numberLong": "9223372036854775807"}, "d": 1e19})"),
            I64(kI64Max));
  EXPECT_EQ(Value("{max: [i, d]}", R"({"i": 2, "d": 2.5})"), D(2.5));
  EXPECT_EQ(Value("{min: [i, d]}", R"({"i": 2, "d": 1.5})"), D(1.5));
  EXPECT_EQ(Value("{min: [i, d]}", R"({"i": -2, "d": -1.5})"), I32(-2));
}

TEST(ComputedExpression, MinMaxTiesKeepTheFirst) {
  const char* doc = R"({"a": 2, "b": 2.0, "c": {"$numberLong": "2"}})";
  EXPECT_EQ(Value("{max: [a, b, c]}", doc), I32(2));
  EXPECT_EQ(Value("{max: [b, a, c]}", doc), D(2.0));
  EXPECT_EQ(Value("{min: [c, b, a]}", doc), I64(2));
}

TEST(ComputedExpression, MinMaxAcrossTypesInBsonOrder) {
  // numbers < string < bool < date
  const char* doc = R"({"n": 1000, "s": "a", "b": false,
                        "d": {"$date": {"$numberLong": "0"}}, "z": null})";
  EXPECT_EQ(Value("{max: [n, s]}", doc), S("a"));
  EXPECT_EQ(Value("{min: [s, n]}", doc), I32(1000));
  EXPECT_EQ(Value("{max: [b, s, n]}", doc), ComputedValue{false});
  EXPECT_EQ(Value("{max: [d, b, s, n]}", doc), ComputedValue{DateMs{0}});
  EXPECT_EQ(Value("{min: [d, b, s, n]}", doc), I32(1000));
  EXPECT_EQ(Value("{min: [d, b, z]}", doc), ComputedValue{false});  // null ignored
  EXPECT_EQ(Value("{max: [t, f]}", R"({"t": true, "f": false})"), ComputedValue{true});
  EXPECT_EQ(Value("{min: [t, f]}", R"({"t": true, "f": false})"), ComputedValue{false});
  EXPECT_EQ(Value("{max: [x, y]}",
                  R"({"x": {"$date": {"$numberLong": "-5"}}, "y": {"$date": {"$numberLong": "7"}}})"),
            ComputedValue{DateMs{7}});
  // Strings compare bytewise: "B" < "a", "é" (0xC3..) above every ASCII letter.
  EXPECT_EQ(Value("{min: [x, y]}", R"({"x": "a", "y": "B"})"), S("B"));
  EXPECT_EQ(Value("{max: [x, y, z]}", R"({"x": "zz", "y": "é", "z": "z"})"), S("é"));
  EXPECT_EQ(Value("{max: [x, y]}", R"({"x": "ab", "y": "abc"})"), S("abc"));
}

TEST(ComputedExpression, MinMaxNullsAndNaN) {
  EXPECT_EQ(Value("{max: [a, b]}", R"({"a": null})"), kNull);
  EXPECT_EQ(Value("{min: [a, b]}", "{}"), kNull);
  EXPECT_EQ(Value("{min: a}", R"({"a": []})"), kNull);
  EXPECT_EQ(Value("{min: a}", R"({"a": [null, 4, null, 2]})"), I32(2));
  // NaN sorts below every number.
  auto min = Value("{min: [a, b]}", R"({"a": 1, "b": {"$numberDouble": "NaN"}})");
  ASSERT_TRUE(std::holds_alternative<double>(min));
  EXPECT_TRUE(std::isnan(std::get<double>(min)));
  EXPECT_EQ(Value("{max: [a, b]}", R"({"a": 1, "b": {"$numberDouble": "NaN"}})"), I32(1));
  EXPECT_EQ(Value("{max: [a, b]}", R"({"a": 1, "b": {"$numberDouble": "-Infinity"}})"), I32(1));
  EXPECT_EQ(Value("{max: [a, b]}", R"({"a": 1, "b": {"$numberDouble": "Infinity"}})"),
            D(std::numeric_limits<double>::infinity()));
}

TEST(ComputedExpression, MinMaxSpreadArrays) {
  EXPECT_EQ(Value("{max: scores}", R"({"scores": [3, 9.5, 1]})"), D(9.5));
  EXPECT_EQ(Value("{min: [scores, 0]}", R"({"scores": [3, 9.5, 1]})"), I32(0));
  EXPECT_EQ(Value("{max: items.at}",
                  R"({"items": [{"at": {"$date": {"$numberLong": "10"}}},
                                {"at": {"$date": {"$numberLong": "30"}}}, {"at": null}]})"),
            ComputedValue{DateMs{30}});
}

TEST(ComputedExpression, MinMaxErrors) {
  EXPECT_EQ(Error("{max: [a, b]}", R"({"a": 1, "b": {"x": 1}})"),
            "'b' is a document, expected a number, string, boolean or date");
  EXPECT_EQ(Error("{min: [a, b]}", R"({"a": 1, "b": {"$oid": "5f1d7f3e9d3b2a0001a1b2c3"}})"),
            "'b' is an ObjectId, expected a number, string, boolean or date");
  EXPECT_EQ(Error("{min: [a, b]}", R"({"a": 1, "b": {"$binary": {"base64": "AA==", "subType": "00"}}})"),
            "'b' is binary data, expected a number, string, boolean or date");
  EXPECT_EQ(Error("{max: [a, b]}",
                  R"({"a": 1, "b": {"$timestamp": {"t": 1, "i": 1}}})"),
            "'b' is a timestamp, expected a number, string, boolean or date");
  EXPECT_EQ(Error("{max: a}", R"({"a": [1, {"$numberDecimal": "2"}]})"),
            "'a' is a decimal128; decimal128 is not supported in computed fields");
}

// ---------------------------------------------------------------------------
// concat

TEST(ComputedExpression, Concat) {
  EXPECT_EQ(Value("{concat: [first, {literal: \" \"}, last]}", R"({"first": "Ada", "last": "L"})"),
            S("Ada L"));
  EXPECT_EQ(Value("{concat: a}", R"({"a": "x"})"), S("x"));
  EXPECT_EQ(Value("{concat: tags}", R"({"tags": ["a", "b", "c"]})"), S("abc"));
  EXPECT_EQ(Value("{concat: tags}", R"({"tags": []})"), S(""));
  EXPECT_EQ(Value("{concat: [a, {literal: \"\"}]}", R"({"a": ""})"), S(""));
  // Strings may hold NUL bytes.
  EXPECT_EQ(Value("{concat: [a, b]}", R"({"a": "x\u0000y", "b": "z"})"), S(std::string("x\0yz", 4)));
}

TEST(ComputedExpression, ConcatNullAndErrors) {
  EXPECT_EQ(Value("{concat: [first, last]}", R"({"first": "Ada"})"), kNull);
  EXPECT_EQ(Value("{concat: [first, last]}", R"({"first": "Ada", "last": null})"), kNull);
  EXPECT_EQ(Value("{concat: tags}", R"({"tags": ["a", null]})"), kNull);
  EXPECT_EQ(Error("{concat: [first, n]}", R"({"first": "Ada", "n": 1})"),
            "'n' is a number, expected a string");
  EXPECT_EQ(Error("{concat: [first, 1]}", R"({"first": "Ada"})"),
            "the literal 1 is a number, expected a string");
  EXPECT_EQ(Error("{concat: [first, {literal: true}]}", R"({"first": "Ada"})"),
            "the literal true is a boolean, expected a string");
  EXPECT_EQ(Error("{concat: [first, d]}", R"({"first": "A", "d": {"$date": {"$numberLong": "0"}}})"),
            "'d' is a date, expected a string");
  EXPECT_EQ(Error("{concat: [first, last]}", R"({"first": null, "last": 1})"),
            "'last' is a number, expected a string");
  EXPECT_EQ(Error("{concat: [first, {sum: [n]}]}", R"({"first": "A", "n": 1})"),
            "the sum is a number, expected a string");
}

// ---------------------------------------------------------------------------
// each

TEST(ComputedExpression, EachEvaluatesOnEveryElement) {
  const char* doc = R"({"items": [{"price": 2, "qty": 3}, {"price": 4, "qty": 5}]})";
  EXPECT_EQ(Value("{sum: {each: items, of: {product: [price, qty]}}}", doc), I32(26));
  EXPECT_EQ(Value("{max: {each: items, of: {product: [price, qty]}}}", doc), I32(20));
  EXPECT_EQ(Value("{min: {each: items, of: price}}", doc), I32(2));
  EXPECT_EQ(Value("{sum: {each: items, of: 1}}", doc), I32(2));  // literals inside each
  EXPECT_EQ(Value("{sum: [{each: items, of: qty}, 100]}", doc), I32(108));
  // Paths inside each are relative to the element, and may be dotted.
  EXPECT_EQ(Value("{sum: {each: items, of: p.v}}", R"({"items": [{"p": {"v": 1}}, {"p": {"v": 2}}]})"),
            I32(3));
  // The each path may itself be dotted.
  EXPECT_EQ(Value("{sum: {each: order.items, of: qty}}",
                  R"({"order": {"items": [{"qty": 1}, {"qty": 2}]}})"),
            I32(3));
  EXPECT_EQ(Value("{concat: {each: people, of: {concat: [name, {literal: \";\"}]}}}",
                  R"({"people": [{"name": "a"}, {"name": "b"}]})"),
            S("a;b;"));
}

TEST(ComputedExpression, NestedEach) {
  const char* doc = R"({"orders": [
      {"items": [{"price": 1, "qty": 2}, {"price": 3, "qty": 1}]},
      {"items": []},
      {"items": [{"price": 10, "qty": 10}]}]})";
  EXPECT_EQ(Value("{sum: {each: orders, of: {each: items, of: {product: [price, qty]}}}}", doc),
            I32(105));
  EXPECT_EQ(Value("{max: {each: orders, of: {each: items, of: price}}}", doc), I32(10));
  EXPECT_EQ(Value("{sum: {each: orders, of: {count: items}}}", doc), I32(3));
  EXPECT_EQ(Value("{max: {each: orders, of: {sum: {each: items, of: qty}}}}", doc), I32(10));
}

TEST(ComputedExpression, EachElementsThatAreNotDocuments) {
  // Field paths of a non-document element are missing: ignored by sum and
  // max, null for product and concat.
  const char* doc = R"({"items": [{"price": 2}, 5, "x", null, [1], {"price": 3}]})";
  EXPECT_EQ(Value("{sum: {each: items, of: price}}", doc), I32(5));
  EXPECT_EQ(Value("{max: {each: items, of: price}}", doc), I32(3));
  EXPECT_EQ(Value("{product: {each: items, of: price}}", doc), kNull);
  EXPECT_EQ(Value("{concat: {each: items, of: name}}", doc), kNull);
  // An element without the field, likewise.
  EXPECT_EQ(Value("{product: {each: items, of: price}}", R"({"items": [{"price": 2}, {}]})"), kNull);
  EXPECT_EQ(Value("{product: {each: items, of: price}}", R"({"items": [{"price": 2}, {"price": 4}]})"),
            I32(8));
}

TEST(ComputedExpression, EachOverMissingNullAndEmpty) {
  EXPECT_EQ(Value("{sum: {each: items, of: price}}", "{}"), I32(0));
  EXPECT_EQ(Value("{sum: {each: items, of: price}}", R"({"items": null})"), I32(0));
  EXPECT_EQ(Value("{sum: {each: items, of: price}}", R"({"items": []})"), I32(0));
  EXPECT_EQ(Value("{product: {each: items, of: price}}", "{}"), kNull);  // a missing operand
  EXPECT_EQ(Value("{product: {each: items, of: price}}", R"({"items": []})"), I32(1));
  EXPECT_EQ(Value("{max: {each: items, of: price}}", "{}"), kNull);
  EXPECT_EQ(Value("{concat: {each: items, of: name}}", R"({"items": []})"), S(""));
  EXPECT_EQ(Value("{each: items, of: price}", "{}"), kNull);
}

TEST(ComputedExpression, EachErrors) {
  EXPECT_EQ(Error("{sum: {each: items, of: price}}", R"({"items": 5})"),
            "'items' is a number, expected an array");
  EXPECT_EQ(Error("{sum: {each: items, of: price}}", R"({"items": {"price": 5}})"),
            "'items' is a document, expected an array");
  EXPECT_EQ(Error("{each: items, of: price}", R"({"items": [{"price": 1}]})"),
            "each of 'items' is an array, expected a single value");
  EXPECT_EQ(Error("{sum: {each: items, of: {product: [price, qty]}}}",
                  R"({"items": [{"price": 1, "qty": 2}, {"price": 1, "qty": "2"}]})"),
            "'qty' is a string, expected a number");
  EXPECT_EQ(Error("{sum: {each: items, of: price}}", R"({"items": [{"price": {"$numberDecimal": "1"}}]})"),
            "'price' is a decimal128; decimal128 is not supported in computed fields");
  EXPECT_EQ(Error("{divide: [{each: items, of: price}, 2]}", R"({"items": []})"),
            "each of 'items' is an array, expected a number");
}

// {a: [[...[1, 2]...]]}, `levels` arrays deep, built bottom-up (the JSON
// reader has a nesting limit of its own).
Json NestedArrays(int levels) {
  bson_t* inner = bson_new();
  BSON_APPEND_INT32(inner, "0", 1);
  BSON_APPEND_INT32(inner, "1", 2);
  for (int i = 1; i < levels; ++i) {
    bson_t* outer = bson_new();
    bson_append_array(outer, "0", 1, inner);
    bson_destroy(inner);
    inner = outer;
  }
  Json doc(bson_new());
  bson_append_array(doc.get(), "a", 1, inner);
  bson_destroy(inner);
  return doc;
}

TEST(ComputedExpression, DeeplyNestedArraysAreRefusedNotRecursedInto) {
  Loaded loaded = Expr("{sum: a}");
  ASSERT_TRUE(loaded.expression);
  Json deep = NestedArrays(3000);
  auto result = Evaluate(*loaded.expression, deep.get());
  ASSERT_TRUE(std::holds_alternative<EvaluationError>(result));
  EXPECT_EQ(std::get<EvaluationError>(result).message, "'a' nests arrays more than 100 levels deep");
  Json shallow = NestedArrays(50);  // fine
  auto ok = Evaluate(*loaded.expression, shallow.get());
  ASSERT_TRUE(std::holds_alternative<ComputedValue>(ok));
  EXPECT_EQ(std::get<ComputedValue>(ok), I32(3));
}

TEST(ComputedExpression, SameExpressionManyDocuments) {
  Loaded loaded = Expr("{sum: {each: items, of: {product: [price, qty]}}}");
  ASSERT_TRUE(loaded.expression);
  for (int n = 0; n < 20; ++n) {
    std::string json = "{\"items\": [";
    for (int i = 0; i < n; ++i) json += std::string(i ? "," : "") + "{\"price\": 2, \"qty\": 3}";
    json += "]}";
    Json doc = Parse(json);
    auto result = Evaluate(*loaded.expression, doc.get());
    ASSERT_TRUE(std::holds_alternative<ComputedValue>(result));
    EXPECT_EQ(std::get<ComputedValue>(result), I32(6 * n));
  }
}

// ---------------------------------------------------------------------------
// ValueOf, AppendComputedValue, HoldsValue, DescribeValue

// The element `key` of `doc`.
bson_iter_t At(const Json& doc, const char* key) {
  bson_iter_t it;
  EXPECT_TRUE(bson_iter_init_find(&it, doc.get(), key)) << key;
  return it;
}

TEST(ComputedExpression, ValueOf) {
  Json doc = Parse(R"({"n": null, "b": true, "i": 1, "l": {"$numberLong": "2"}, "d": 1.5,
                       "s": "t", "t": {"$date": {"$numberLong": "9"}}, "o": {"x": 1}, "a": [1],
                       "dec": {"$numberDecimal": "1"}, "oid": {"$oid": "5f1d7f3e9d3b2a0001a1b2c3"},
                       "u": {"$undefined": true}})");
  auto of = [&](const char* key) {
    bson_iter_t it = At(doc, key);
    return ValueOf(&it);
  };
  EXPECT_EQ(of("n"), std::optional<ComputedValue>(kNull));
  EXPECT_EQ(of("b"), std::optional<ComputedValue>(true));
  EXPECT_EQ(of("i"), std::optional<ComputedValue>(I32(1)));
  EXPECT_EQ(of("l"), std::optional<ComputedValue>(I64(2)));
  EXPECT_EQ(of("d"), std::optional<ComputedValue>(D(1.5)));
  EXPECT_EQ(of("s"), std::optional<ComputedValue>(S("t")));
  EXPECT_EQ(of("t"), std::optional<ComputedValue>(DateMs{9}));
  for (const char* key : {"o", "a", "dec", "oid", "u"}) EXPECT_FALSE(of(key).has_value()) << key;
}

TEST(ComputedExpression, AppendComputedValueRoundTrips) {
  const ComputedValue values[] = {kNull, true, false, I32(-3), I64(1LL << 40), D(0.1), S("ä\"b"),
                                  S(std::string("a\0b", 3)), DateMs{-1}};
  bson_t out = BSON_INITIALIZER;
  int index = 0;
  for (const auto& value : values) AppendComputedValue(&out, "k" + std::to_string(index++), value);
  ASSERT_EQ(bson_count_keys(&out), std::size(values));
  bson_iter_t it;
  ASSERT_TRUE(bson_iter_init(&it, &out));
  for (const auto& value : values) {
    ASSERT_TRUE(bson_iter_next(&it));
    std::optional<ComputedValue> back = ValueOf(&it);
    ASSERT_TRUE(back.has_value()) << bson_iter_key(&it);
    EXPECT_EQ(*back, value);
    EXPECT_TRUE(HoldsValue(&it, value));
  }
  bson_iter_t k0;
  ASSERT_TRUE(bson_iter_init_find(&k0, &out, "k0"));
  EXPECT_EQ(bson_iter_type(&k0), BSON_TYPE_NULL);
  // A key is taken by its length, not up to a NUL.
  bson_t keyed = BSON_INITIALIZER;
  AppendComputedValue(&keyed, std::string_view("totalXYZ", 5), I32(1));
  EXPECT_TRUE(bson_has_field(&keyed, "total"));
  bson_destroy(&keyed);
  bson_destroy(&out);
}

TEST(ComputedExpression, HoldsValueNumbersAcrossTypes) {
  Json doc = Parse(R"({"i": 42, "l": {"$numberLong": "42"}, "d": 42.0, "f": 0.30000000000000004,
                       "big": {"$numberLong": "9007199254740993"}, "z": 0.0, "tiny": 1e-13,
                       "nan": {"$numberDouble": "NaN"}, "inf": {"$numberDouble": "Infinity"}})");
  for (const char* key : {"i", "l", "d"}) {
    bson_iter_t it = At(doc, key);
    EXPECT_TRUE(HoldsValue(&it, I32(42))) << key;
    EXPECT_TRUE(HoldsValue(&it, I64(42))) << key;
    EXPECT_TRUE(HoldsValue(&it, D(42.0))) << key;
    EXPECT_FALSE(HoldsValue(&it, I32(43))) << key;
    EXPECT_FALSE(HoldsValue(&it, D(42.001))) << key;
    EXPECT_FALSE(HoldsValue(&it, S("42"))) << key;
    EXPECT_FALSE(HoldsValue(&it, kNull)) << key;
  }
  bson_iter_t d = At(doc, "d");
  EXPECT_TRUE(HoldsValue(&d, D(42.0 * (1 + 5e-10))));  // within a relative 1e-9
  EXPECT_FALSE(HoldsValue(&d, D(42.0 * (1 + 5e-9))));
  bson_iter_t f = At(doc, "f");
  EXPECT_TRUE(HoldsValue(&f, D(0.3)));  // 0.1 + 0.2, added in another order
  bson_iter_t big = At(doc, "big");
  EXPECT_TRUE(HoldsValue(&big, I64(9007199254740993LL)));
  EXPECT_FALSE(HoldsValue(&big, I64(9007199254740992LL)));  // integers: exact
  EXPECT_TRUE(HoldsValue(&big, D(9007199254740992.0)));     // a double: tolerance
  bson_iter_t z = At(doc, "z");
  EXPECT_TRUE(HoldsValue(&z, I32(0)));
  EXPECT_TRUE(HoldsValue(&z, D(-0.0)));
  EXPECT_TRUE(HoldsValue(&z, D(5e-13)));  // absolute 1e-12 near 0
  EXPECT_FALSE(HoldsValue(&z, D(1e-11)));
  bson_iter_t tiny = At(doc, "tiny");
  EXPECT_TRUE(HoldsValue(&tiny, I32(0)));
  bson_iter_t nan = At(doc, "nan");
  EXPECT_TRUE(HoldsValue(&nan, D(std::nan(""))));
  EXPECT_FALSE(HoldsValue(&nan, D(0)));
  bson_iter_t inf = At(doc, "inf");
  EXPECT_TRUE(HoldsValue(&inf, D(std::numeric_limits<double>::infinity())));
  EXPECT_FALSE(HoldsValue(&inf, D(-std::numeric_limits<double>::infinity())));
  EXPECT_FALSE(HoldsValue(&inf, D(1e308)));
}

TEST(ComputedExpression, HoldsValueOtherTypesExactly) {
  Json doc = Parse(R"({"s": "abc", "b": true, "t": {"$date": {"$numberLong": "5"}}, "n": null,
                       "o": {"x": 1}, "dec": {"$numberDecimal": "1"}})");
  bson_iter_t s = At(doc, "s"), b = At(doc, "b"), t = At(doc, "t"), n = At(doc, "n"),
              o = At(doc, "o"), dec = At(doc, "dec");
  EXPECT_TRUE(HoldsValue(&s, S("abc")));
  EXPECT_FALSE(HoldsValue(&s, S("abd")));
  EXPECT_FALSE(HoldsValue(&s, S("ABC")));
  EXPECT_TRUE(HoldsValue(&b, true));
  EXPECT_FALSE(HoldsValue(&b, false));
  EXPECT_FALSE(HoldsValue(&b, I32(1)));  // a bool is not a number
  EXPECT_TRUE(HoldsValue(&t, DateMs{5}));
  EXPECT_FALSE(HoldsValue(&t, DateMs{6}));
  EXPECT_FALSE(HoldsValue(&t, I64(5)));
  EXPECT_TRUE(HoldsValue(&n, kNull));
  EXPECT_FALSE(HoldsValue(&n, I32(0)));
  EXPECT_FALSE(HoldsValue(&n, S("")));
  EXPECT_FALSE(HoldsValue(&o, kNull));
  EXPECT_FALSE(HoldsValue(&dec, I32(1)));
  // A missing element holds null only.
  EXPECT_TRUE(HoldsValue(nullptr, kNull));
  EXPECT_FALSE(HoldsValue(nullptr, I32(0)));
  EXPECT_FALSE(HoldsValue(nullptr, S("")));
  EXPECT_FALSE(HoldsValue(nullptr, false));
}

TEST(ComputedExpression, DescribeValue) {
  EXPECT_EQ(DescribeValue(I32(42)), "42");
  EXPECT_EQ(DescribeValue(I64(-9000000000LL)), "-9000000000");
  EXPECT_EQ(DescribeValue(D(4.5)), "4.5");
  EXPECT_EQ(DescribeValue(D(3.0)), "3.0");
  EXPECT_EQ(DescribeValue(D(0.1)), "0.1");
  EXPECT_EQ(DescribeValue(D(1e300)), "1e+300");
  EXPECT_EQ(DescribeValue(D(std::nan(""))), "NaN");
  EXPECT_EQ(DescribeValue(D(-std::numeric_limits<double>::infinity())), "-Infinity");
  EXPECT_EQ(DescribeValue(S("text")), "\"text\"");
  EXPECT_EQ(DescribeValue(S("a\"b\\c\n")), "\"a\\\"b\\\\c\\u000a\"");
  EXPECT_EQ(DescribeValue(kNull), "null");
  EXPECT_EQ(DescribeValue(true), "true");
  EXPECT_EQ(DescribeValue(false), "false");
  EXPECT_EQ(DescribeValue(DateMs{1700000000000}), "Date(1700000000000)");
}

}  // namespace
}  // namespace remold
