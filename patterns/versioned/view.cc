#include "patterns/versioned/view.h"

#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "patterns/expression/aggregation.h"
#include "rewrite/type_tests.h"

namespace remold {
namespace {

using Text = std::string;

Text Q(const std::string& s) { return JsonQuote(s); }

Text NameList(const std::vector<std::string>& names) {
  Text out;
  for (const std::string& name : names) out += (out.empty() ? "" : ", ") + Q(name);
  return "[" + out + "]";
}

Text Cond(const Text& test, const Text& then, const Text& otherwise) {
  return R"({"$cond": [)" + test + ", " + then + ", " + otherwise + "]}";
}
Text IsNull(const Text& x) { return R"({"$eq": [)" + x + ", null]}"; }
Text Size(const Text& list) { return R"({"$size": )" + list + "}"; }
Text Object(const Text& entries) { return R"({"$arrayToObject": )" + entries + "}"; }
Text Concat(const Text& a, const Text& b) { return R"({"$concatArrays": [)" + a + ", " + b + "]}"; }
Text Entry(const std::string& key, const Text& value) { return R"({"k": )" + Q(key) + R"(, "v": )" + value + "}"; }
// The fields of document `d` as [{k, v}] ([] for a value that is not one).
Text Entries(const Text& d) { return R"({"$ifNull": [{"$objectToArray": )" + d + "}, []]}"; }
Text Path(const std::string& var, const std::string& field) { return Q(var + "." + field); }

Text Literal(const Expression::Literal& literal) {
  struct {
    Text operator()(std::monostate) const { return "null"; }
    Text operator()(bool b) const { return b ? "true" : "false"; }
    Text operator()(int64_t i) const {
      if (i >= INT32_MIN && i <= INT32_MAX) return std::to_string(i);
      return R"({"$numberLong": ")" + std::to_string(i) + "\"}";
    }
    Text operator()(double d) const {
      if (std::isnan(d)) return R"({"$numberDouble": "NaN"})";
      if (std::isinf(d)) return d > 0 ? R"({"$numberDouble": "Infinity"})" : R"({"$numberDouble": "-Infinity"})";
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.17g", d);
      return R"({"$numberDouble": ")" + Text(buf) + "\"}";
    }
    Text operator()(const std::string& s) const { return Q(s); }
  } text;
  return R"({"$literal": )" + std::visit(text, literal) + "}";
}

// An integral number below 2^53 in magnitude (n: the value, 0 for another type).
Text IsIntegral(const Text& x, const Text& n) {
  return R"({"$and": [)" + IsNumber(x) + R"(, {"$eq": [{"$trunc": [)" + n + "]}, " + n +
         R"(]}, {"$gte": [{"$abs": [)" + n + R"(]}, 0]}, {"$lt": [{"$abs": [)" + n +
         R"(]}, {"$numberLong": "9007199254740992"}]}]})";
}

Text Convert(const Text& n, const char* type) {
  return R"({"$convert": {"input": )" + n + R"(, "to": ")" + type + "\"}}";
}

// Whether `x` can be converted to `type` (otherwise the step leaves it as it is).
Text Convertible(const Text& x, UpgradeStep::Type type) {
  const Text n = Cond(IsNumber(x), x, "0");
  switch (type) {
    case UpgradeStep::Type::kDouble: return IsNumber(x);
    case UpgradeStep::Type::kLong:
    case UpgradeStep::Type::kString: return IsIntegral(x, n);
    case UpgradeStep::Type::kInt:
      return R"({"$and": [)" + IsIntegral(x, n) + R"(, {"$gte": [)" + n + R"(, -2147483648]}, {"$lte": [)" + n +
             ", 2147483647]}]}";
  }
  return "false";
}

// `x` converted to `type`, where Convertible(x, type).
Text Converted(const Text& x, UpgradeStep::Type type) {
  const Text n = Cond(IsNumber(x), x, "0");
  switch (type) {
    case UpgradeStep::Type::kDouble: return Convert(n, "double");
    case UpgradeStep::Type::kLong: return Convert(n, "long");
    case UpgradeStep::Type::kString: return Convert(Convert(n, "long"), "string");
    case UpgradeStep::Type::kInt: return Convert(n, "int");
  }
  return x;
}

// Writes the upgrade of one version as aggregation text. Every $map and
// $filter gets a variable name of its own: the test backend keeps
// variables in one scope, where an inner one cannot reuse an outer's name.
class UpgradeText {
 public:
  explicit UpgradeText(const VersionedRule& rule) : rule_(rule) {}

  // The document in the variable `input` ("$$ROOT", "$$u1"), at version
  // `index - 1`, brought to version `index`, or as it was when a step
  // cannot apply (a step's null ends the chain).
  Text Version(size_t index, const std::string& input) {
    const DocumentVersion& version = rule_.versions[index];
    const size_t steps = version.upgrade.size();
    auto var = [](size_t i) { return "s" + std::to_string(i); };
    const Text last = Q("$$" + var(steps));
    Text body = Cond(IsNull(last), "null", Set(last, rule_.field, R"({"$literal": )" + std::to_string(version.number) + "}"));
    for (size_t i = steps; i > 0; --i) {
      const std::string before = "$$" + var(i - 1);
      Text value = Step(version.upgrade[i - 1], before);
      if (i > 1) value = Cond(IsNull(Q(before)), "null", value);
      body = Let(var(i), value, body);
    }
    // The steps read the input through a variable of their own, bound
    // outside them: a server may resolve $$ROOT inside a $map or $filter to
    // the element in scope (the test backend does, in a step's nested
    // $filter), so $$ROOT appears only where no step has begun.
    body = Let(var(0), Q(input), body);
    return R"({"$ifNull": [)" + body + ", " + Q(input) + "]}";
  }

  // Whether the version field of the document in `input` is `number`
  // (missing and null are the first version).
  Text AtVersion(int32_t number, const std::string& input) const {
    const Text stored = Q(input == "$$ROOT" ? "$" + rule_.field : input + "." + rule_.field);
    Text test = R"({"$eq": [)" + stored + ", " + std::to_string(number) + "]}";
    if (number == rule_.first()) test = R"({"$or": [)" + IsNull(R"({"$ifNull": [)" + stored + ", null]}") + ", " + test + "]}";
    return test;
  }

  // The document in `input` after the step to version `index`, when it is
  // at the version before.
  Text Transition(size_t index, const std::string& input) {
    return Cond(AtVersion(rule_.versions[index - 1].number, input), Version(index, input), Q(input));
  }

 private:
  std::string Fresh() { return "e" + std::to_string(++names_); }

  // [x], for any expression x: the test backend reads a string in an
  // array literal ("$$e1") as the string itself, and folds a $map over a
  // literal array before any document is there.
  static Text OneElement(const Text& x) { return R"([{"$ifNull": [)" + x + ", null]}]"; }
  // `body` with `value` bound to $$name ($let is not on the test backend).
  Text Let(const std::string& name, const Text& value, const Text& body) {
    return R"({"$arrayElemAt": [{"$map": {"input": )" + OneElement(value) + R"(, "as": )" + Q(name) +
           R"(, "in": )" + body + "}}, 0]}";
  }
  // [f(e) for e in list], with `f` given the variable's name.
  template <typename Fn>
  Text Map(const Text& list, Fn&& f) {
    const std::string e = Fresh();
    return R"({"$map": {"input": )" + list + R"(, "as": ")" + e + R"(", "in": )" + f("$$" + e) + "}}";
  }
  Text Keys(const Text& entries) {
    return Map(entries, [](const std::string& e) { return Q(e + ".k"); });
  }
  Text Has(const Text& d, const std::string& f) { return R"({"$in": [)" + Q(f) + ", " + Keys(Entries(d)) + "]}"; }
  Text FilterKeys(const Text& entries, const Text& names, bool keep_named) {
    const std::string e = Fresh();
    Text test = R"({"$in": [)" + Q("$$" + e + ".k") + ", " + names + "]}";
    if (!keep_named) test = R"({"$not": [)" + test + "]}";
    return R"({"$filter": {"input": )" + entries + R"(, "as": ")" + e + R"(", "cond": )" + test + "}}";
  }
  // Each entry named `f` replaced by `replacement` (text, given the entry).
  template <typename Fn>
  Text Replace(const Text& entries, const std::string& f, Fn&& replacement) {
    return Map(entries, [&](const std::string& e) {
      return Cond(R"({"$eq": [)" + Q(e + ".k") + ", " + Q(f) + "]}", replacement(e), Q(e));
    });
  }
  // `d` with field `f` set to `value`: in its place, or added last. The
  // entry's value is null where `value` is missing: a server may build a
  // $cond's branch it does not take (DocumentDB does), where `d` is null or
  // lacks what `value` reads, and $arrayToObject refuses an entry without
  // its v (40392). Where the branch is taken, `value` is never missing,
  // nor undefined (which $ifNull would also make null): a computed string
  // or null, a converted number, a literal.
  Text Set(const Text& d, const std::string& f, const Text& value) {
    const Text present = R"({"$ifNull": [)" + value + ", null]}";
    Text replaced = Replace(Entries(d), f, [&](const std::string&) { return Entry(f, present); });
    return Object(Concat(replaced, Cond(Has(d, f), "[]", "[" + Entry(f, present) + "]")));
  }

  // One step on the document in the variable `var` ("$$ROOT", "$$s1"): the
  // document after it, or null when the step cannot apply (see upgrade.h).
  Text Step(const UpgradeStep& step, const std::string& var) {
    using Kind = UpgradeStep::Kind;
    const Text d = Q(var);
    switch (step.kind) {
      case Kind::kRename: {
        Text renamed = Replace(FilterKeys(Entries(d), NameList({step.to}), false), step.field,
                               [&](const std::string& e) { return Entry(step.to, Q(e + ".v")); });
        return Cond(Has(d, step.field), Object(renamed), d);
      }
      case Kind::kDefault:
        return Cond(Has(d, step.field), d, Object(Concat(Entries(d), "[" + Entry(step.field, Literal(step.value)) + "]")));
      case Kind::kCompute:
        return Cond(StringInputs(step.expression, var), Set(d, step.field, AggregationOf(step.expression, var)), "null");
      case Kind::kConvert:
        return Cond(Convertible(Path(var, step.field), step.type),
                    Set(d, step.field, Converted(Path(var, step.field), step.type)), d);
      case Kind::kMoveInto: {
        const Text sub = Path(var, step.field);
        const Text moved = FilterKeys(Entries(d), NameList(step.fields), true);
        const Text safe_sub = Cond(IsDocument(sub), sub, R"({"$literal": {}})");
        const Text inner = Object(Concat(FilterKeys(Entries(safe_sub), Keys(moved), false), moved));
        const Text rest = FilterKeys(Entries(d), NameList(step.fields), false);
        const Text in_place = Object(Replace(rest, step.field, [&](const std::string&) { return Entry(step.field, inner); }));
        const Text added = Object(Concat(rest, "[" + Entry(step.field, inner) + "]"));
        return Cond(R"({"$eq": [)" + Size(moved) + ", 0]}", d,
                    Cond(Has(d, step.field), Cond(IsDocument(sub), in_place, "null"), added));
      }
      case Kind::kMoveOutOf: {
        const Text sub = Path(var, step.field);
        const Text safe_sub = Cond(IsDocument(sub), sub, R"({"$literal": {}})");
        const Text moved = FilterKeys(Entries(safe_sub), NameList(step.fields), true);
        const Text remaining = FilterKeys(Entries(safe_sub), NameList(step.fields), false);
        const Text top = FilterKeys(Entries(d), Keys(moved), false);
        // top[0, at) + moved + {field: remaining} (unless empty) + top(at, end)
        const Text at = R"({"$indexOfArray": [)" + Keys(top) + ", " + Q(step.field) + "]}";
        const Text before = R"({"$slice": [)" + top + ", " + at + "]}";
        const Text after = R"({"$slice": [)" + top + R"(, {"$add": [)" + at + R"(, 1]}, {"$max": [1, )" + Size(top) + "]}]}";
        const Text rest = Cond(R"({"$eq": [)" + Size(remaining) + ", 0]}", "[]",
                               "[" + Entry(step.field, Object(remaining)) + "]");
        const Text moved_out = Object(R"({"$concatArrays": [)" + before + ", " + moved + ", " + rest + ", " + after + "]}");
        return Cond(Has(d, step.field),
                    Cond(IsDocument(sub), Cond(R"({"$eq": [)" + Size(moved) + ", 0]}", d, moved_out), "null"), d);
      }
      case Kind::kRemove:
        return Object(FilterKeys(Entries(d), NameList(step.fields), false));
    }
    return d;
  }

  const VersionedRule& rule_;
  int names_ = 0;
};

}  // namespace

std::vector<Doc> UpgradeStages(const VersionedRule& rule) {
  std::vector<Doc> stages;
  for (size_t i = 1; i < rule.versions.size(); ++i) {
    const Text stage = R"({"$replaceRoot": {"newRoot": )" + UpgradeText(rule).Transition(i, "$$ROOT") + "}}";
    std::string error;
    std::optional<Doc> doc = Doc::FromJson(stage, &error);
    if (!doc) throw std::logic_error("versioned view: " + error);  // the text above is well formed
    stages.push_back(std::move(*doc));
  }
  return stages;
}

std::string OlderVersionsFilter(const VersionedRule& rule) { return rule.Unconverted(); }

std::string NotOlderFilter(const VersionedRule& rule) {
  return "{" + Q(rule.field) + R"(: {"$nin": )" + rule.OlderVersionValues() + "}}";
}

}  // namespace remold
