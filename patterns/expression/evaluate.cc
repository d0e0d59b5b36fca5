#include "patterns/expression/evaluate.h"

#include "common/doc.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

namespace remold {
namespace {

// Arrays nested deeper than this are refused: flattening them recurses, and
// a 16 MiB document can nest millions of levels.
constexpr int kMaxArrayDepth = 100;
// The longest string a concat may build (a BSON document's limit).
constexpr size_t kMaxStringBytes = 16 * 1024 * 1024;

// Thrown inside this file only; becomes the EvaluationError of Evaluate.
struct Failure {
  std::string message;
};

// A value met while evaluating: what ComputedValue holds, plus what only
// exists on the way to a result (missing, an embedded document, a list of
// values, a BSON type expressions do not compute with).
struct Val {
  enum class Kind { kMissing, kScalar, kDocument, kList, kOther };
  Kind kind = Kind::kMissing;
  ComputedValue scalar;               // kScalar
  const uint8_t* data = nullptr;      // kDocument: the document's bytes, in the evaluated
  uint32_t length = 0;                //   document's buffer
  std::vector<Val> list;              // kList
  bson_type_t other = BSON_TYPE_EOD;  // kOther
  const Expression* from = nullptr;   // what produced it, for messages

  bool nullish() const {
    return kind == Kind::kMissing ||
           (kind == Kind::kScalar && std::holds_alternative<std::monostate>(scalar));
  }
  bool number() const {
    return kind == Kind::kScalar && (std::holds_alternative<int32_t>(scalar) ||
                                     std::holds_alternative<int64_t>(scalar) ||
                                     std::holds_alternative<double>(scalar));
  }
  bool decimal() const { return kind == Kind::kOther && other == BSON_TYPE_DECIMAL128; }
};

Val Missing(const Expression* from) {
  Val v;
  v.from = from;
  return v;
}

Val Scalar(ComputedValue value, const Expression* from) {
  Val v;
  v.kind = Val::Kind::kScalar;
  v.scalar = std::move(value);
  v.from = from;
  return v;
}

ComputedValue LiteralValue(const Expression::Literal& literal) {
  struct {
    ComputedValue operator()(std::monostate) const { return std::monostate{}; }
    ComputedValue operator()(bool b) const { return b; }
    // YAML integers are int64; small ones are int32, as a driver would send them.
    ComputedValue operator()(int64_t i) const {
      if (i >= std::numeric_limits<int32_t>::min() && i <= std::numeric_limits<int32_t>::max())
        return static_cast<int32_t>(i);
      return i;
    }
    ComputedValue operator()(double d) const { return d; }
    ComputedValue operator()(const std::string& s) const { return s; }
  } convert;
  return std::visit(convert, literal);
}

// How messages name what produced a value.
std::string Origin(const Expression* e) {
  if (!e) return "a value";
  switch (e->kind) {
    case Expression::Kind::kField: return "'" + e->path + "'";
    case Expression::Kind::kLiteral: return "the literal " + DescribeValue(LiteralValue(e->literal));
    case Expression::Kind::kSum: return "the sum";
    case Expression::Kind::kProduct: return "the product";
    case Expression::Kind::kDivide: return "the quotient";
    case Expression::Kind::kCount: return "the count of '" + e->path + "'";
    case Expression::Kind::kMin: return "the min";
    case Expression::Kind::kMax: return "the max";
    case Expression::Kind::kConcat: return "the concatenation";
    case Expression::Kind::kEach: return "each of '" + e->path + "'";
    case Expression::Kind::kPart: return "the part";
  }
  return "a value";
}

std::string TypeName(const Val& v) {
  switch (v.kind) {
    case Val::Kind::kMissing: return "missing";
    case Val::Kind::kDocument: return "a document";
    case Val::Kind::kList: return "an array";
    case Val::Kind::kScalar:
      switch (v.scalar.index()) {
        case 0: return "null";
        case 1: return "a boolean";
        case 2:
        case 3:
        case 4: return "a number";
        case 5: return "a string";
        case 6: return "a date";
      }
      return "a value";
    case Val::Kind::kOther:
      switch (v.other) {
        case BSON_TYPE_DECIMAL128: return "a decimal128";
        case BSON_TYPE_OID: return "an ObjectId";
        case BSON_TYPE_BINARY: return "binary data";
        case BSON_TYPE_TIMESTAMP: return "a timestamp";
        case BSON_TYPE_REGEX: return "a regular expression";
        case BSON_TYPE_CODE:
        case BSON_TYPE_CODEWSCOPE: return "JavaScript code";
        case BSON_TYPE_SYMBOL: return "a symbol";
        case BSON_TYPE_DBPOINTER: return "a DBPointer";
        case BSON_TYPE_MINKEY: return "MinKey";
        case BSON_TYPE_MAXKEY: return "MaxKey";
        default: return "a value of BSON type " + std::to_string(static_cast<int>(v.other));
      }
  }
  return "a value";
}

[[noreturn]] void FailType(const Val& v, const std::string& expected) {
  if (v.decimal())
    throw Failure{Origin(v.from) + " is a decimal128; decimal128 is not supported in computed fields"};
  throw Failure{Origin(v.from) + " is " + TypeName(v) + ", expected " + expected};
}

Val FromIter(const bson_iter_t* it, const Expression* from, int depth) {
  Val v;
  v.from = from;
  v.kind = Val::Kind::kScalar;
  switch (bson_iter_type(it)) {
    case BSON_TYPE_NULL:
    case BSON_TYPE_UNDEFINED: v.scalar = std::monostate{}; return v;
    case BSON_TYPE_BOOL: v.scalar = bson_iter_bool(it); return v;
    case BSON_TYPE_INT32: v.scalar = bson_iter_int32(it); return v;
    case BSON_TYPE_INT64: v.scalar = bson_iter_int64(it); return v;
    case BSON_TYPE_DOUBLE: v.scalar = bson_iter_double(it); return v;
    case BSON_TYPE_UTF8: {
      uint32_t length = 0;
      const char* text = bson_iter_utf8(it, &length);
      v.scalar = std::string(text, length);
      return v;
    }
    case BSON_TYPE_DATE_TIME: v.scalar = DateMs{bson_iter_date_time(it)}; return v;
    case BSON_TYPE_DOCUMENT:
      v.kind = Val::Kind::kDocument;
      bson_iter_document(it, &v.length, &v.data);
      return v;
    case BSON_TYPE_ARRAY: {
      v.kind = Val::Kind::kList;
      if (depth >= kMaxArrayDepth)
        throw Failure{Origin(from) + " nests arrays more than " + std::to_string(kMaxArrayDepth) +
                      " levels deep"};
      bson_iter_t child;
      if (bson_iter_recurse(it, &child)) {
        while (bson_iter_next(&child)) v.list.push_back(FromIter(&child, from, depth + 1));
      }
      return v;
    }
    default:
      v.kind = Val::Kind::kOther;
      v.other = bson_iter_type(it);
      return v;
  }
}

// The value at the dotted `path` of the document in `data`. Like MongoDB's
// aggregation field paths, a path through an array yields the list of the
// values found in its document elements (others, and elements without the
// rest of the path, are skipped).
Val Lookup(const uint8_t* data, uint32_t length, std::string_view path, const Expression* from,
           int depth) {
  size_t dot = path.find('.');
  std::string_view head = path.substr(0, dot);
  bson_t doc;
  bson_iter_t it;
  if (!bson_init_static(&doc, data, length) || !bson_iter_init(&it, &doc)) return Missing(from);
  while (bson_iter_next(&it)) {
    if (bson_iter_key_len(&it) != head.size() ||
        std::memcmp(bson_iter_key(&it), head.data(), head.size()) != 0)
      continue;
    if (dot == std::string_view::npos) return FromIter(&it, from, depth);
    std::string_view rest = path.substr(dot + 1);
    const uint8_t* sub = nullptr;
    uint32_t sub_length = 0;
    if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
      bson_iter_document(&it, &sub_length, &sub);
      return Lookup(sub, sub_length, rest, from, depth);
    }
    if (BSON_ITER_HOLDS_ARRAY(&it)) {
      Val list;
      list.kind = Val::Kind::kList;
      list.from = from;
      bson_iter_t child;
      if (bson_iter_recurse(&it, &child)) {
        while (bson_iter_next(&child)) {
          if (!BSON_ITER_HOLDS_DOCUMENT(&child)) continue;
          bson_iter_document(&child, &sub_length, &sub);
          Val found = Lookup(sub, sub_length, rest, from, depth + 1);
          if (found.kind != Val::Kind::kMissing) list.list.push_back(std::move(found));
        }
      }
      return list;
    }
    return Missing(from);
  }
  return Missing(from);
}

// The value at `path` in `scope`: the evaluated document, or inside `each`
// one element (field paths of an element that is not a document are missing).
Val Field(const std::string& path, const Val& scope, const Expression* from) {
  if (scope.kind != Val::Kind::kDocument) return Missing(from);
  return Lookup(scope.data, scope.length, path, from, 0);
}

// --- numbers ----------------------------------------------------------------

double ToDouble(const ComputedValue& n) {
  if (const auto* i = std::get_if<int32_t>(&n)) return *i;
  if (const auto* l = std::get_if<int64_t>(&n)) return static_cast<double>(*l);
  return std::get<double>(n);
}

// Adds or multiplies numbers the way $sum and $multiply do: int32 while the
// result fits, then int64, then double; any double makes the result double.
class Arithmetic {
 public:
  explicit Arithmetic(int32_t start) : i_(start) {}

  void Add(const ComputedValue& n) {
    Apply(n, [](int64_t a, int64_t b, int64_t* r) { return __builtin_add_overflow(a, b, r); },
          [](double a, double b) { return a + b; });
  }
  void Multiply(const ComputedValue& n) {
    Apply(n, [](int64_t a, int64_t b, int64_t* r) { return __builtin_mul_overflow(a, b, r); },
          [](double a, double b) { return a * b; });
  }

  ComputedValue Result() const {
    switch (type_) {
      case Type::kInt32: return static_cast<int32_t>(i_);
      case Type::kInt64: return i_;
      case Type::kDouble: return d_;
    }
    return d_;
  }

 private:
  enum class Type { kInt32, kInt64, kDouble };

  template <class IntOp, class DoubleOp>
  void Apply(const ComputedValue& n, IntOp int_op, DoubleOp double_op) {
    if (type_ != Type::kDouble && std::holds_alternative<double>(n)) {
      type_ = Type::kDouble;
      d_ = static_cast<double>(i_);
    }
    if (type_ == Type::kDouble) {
      d_ = double_op(d_, ToDouble(n));
      return;
    }
    int64_t x = std::holds_alternative<int32_t>(n) ? std::get<int32_t>(n) : std::get<int64_t>(n);
    int64_t r = 0;
    if (int_op(i_, x, &r)) {  // int64 overflow: carry on in double
      type_ = Type::kDouble;
      d_ = double_op(static_cast<double>(i_), static_cast<double>(x));
      return;
    }
    i_ = r;
    if (std::holds_alternative<int64_t>(n) || r < std::numeric_limits<int32_t>::min() ||
        r > std::numeric_limits<int32_t>::max())
      type_ = Type::kInt64;
  }

  Type type_ = Type::kInt32;
  int64_t i_ = 0;
  double d_ = 0;
};

// -1, 0, 1 for an int64 against a double, exactly (NaN is below every number).
int CompareIntDouble(int64_t a, double b) {
  if (std::isnan(b)) return 1;
  if (b >= 9223372036854775808.0) return -1;
  if (b < -9223372036854775808.0) return 1;
  int64_t whole = static_cast<int64_t>(b);  // truncated, in range
  if (a != whole) return a < whole ? -1 : 1;
  double fraction = b - static_cast<double>(whole);
  return fraction > 0 ? -1 : (fraction < 0 ? 1 : 0);
}

int CompareNumbers(const ComputedValue& a, const ComputedValue& b) {
  bool a_double = std::holds_alternative<double>(a);
  bool b_double = std::holds_alternative<double>(b);
  if (a_double && b_double) {
    double x = std::get<double>(a), y = std::get<double>(b);
    if (std::isnan(x) || std::isnan(y)) return std::isnan(x) ? (std::isnan(y) ? 0 : -1) : 1;
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  auto integer = [](const ComputedValue& n) {
    return std::holds_alternative<int32_t>(n) ? int64_t{std::get<int32_t>(n)} : std::get<int64_t>(n);
  };
  if (a_double) return -CompareIntDouble(integer(b), std::get<double>(a));
  if (b_double) return CompareIntDouble(integer(a), std::get<double>(b));
  int64_t x = integer(a), y = integer(b);
  return x < y ? -1 : (x > y ? 1 : 0);
}

// MongoDB's canonical order of the types min/max compare:
// null < numbers < string < (object, array, binData, ObjectId) < bool < date.
int TypeRank(const ComputedValue& v) {
  switch (v.index()) {
    case 0: return 0;
    case 1: return 3;
    case 2:
    case 3:
    case 4: return 1;
    case 5: return 2;
    case 6: return 4;
  }
  return 5;
}

int CompareValues(const ComputedValue& a, const ComputedValue& b) {
  int ra = TypeRank(a), rb = TypeRank(b);
  if (ra != rb) return ra < rb ? -1 : 1;
  switch (ra) {
    case 1: return CompareNumbers(a, b);
    case 2: {
      int c = std::get<std::string>(a).compare(std::get<std::string>(b));  // bytewise
      return c < 0 ? -1 : (c > 0 ? 1 : 0);
    }
    case 3: return int(std::get<bool>(a)) - int(std::get<bool>(b));
    case 4: {
      int64_t x = std::get<DateMs>(a).ms, y = std::get<DateMs>(b).ms;
      return x < y ? -1 : (x > y ? 1 : 0);
    }
  }
  return 0;
}

// --- evaluation ---------------------------------------------------------------

Val Eval(const Expression& e, const Val& scope);

// An operand that is a list contributes its elements (nested lists too).
void Spread(Val v, std::vector<Val>& out) {
  if (v.kind != Val::Kind::kList) {
    out.push_back(std::move(v));
    return;
  }
  for (Val& element : v.list) Spread(std::move(element), out);
}

std::vector<Val> Operands(const Expression& e, const Val& scope) {
  std::vector<Val> out;
  for (const Expression& operand : e.operands) Spread(Eval(operand, scope), out);
  return out;
}

Val Sum(const Expression& e, const Val& scope) {
  Arithmetic sum(0);
  for (const Val& v : Operands(e, scope)) {
    if (v.decimal()) FailType(v, "a number");
    if (v.number()) sum.Add(v.scalar);  // others are ignored, as by $sum
  }
  return Scalar(sum.Result(), &e);
}

// Type errors win over nulls, so the outcome does not depend on the order
// of the operands.
Val Product(const Expression& e, const Val& scope) {
  std::vector<Val> values = Operands(e, scope);
  bool null = false;
  for (const Val& v : values) {
    if (v.nullish()) null = true;
    else if (!v.number()) FailType(v, "a number");
  }
  if (null) return Scalar(std::monostate{}, &e);
  Arithmetic product(1);
  for (const Val& v : values) product.Multiply(v.scalar);
  return Scalar(product.Result(), &e);
}

Val Divide(const Expression& e, const Val& scope) {
  Val dividend = Eval(e.operands.at(0), scope);
  Val divisor = Eval(e.operands.at(1), scope);
  for (const Val* v : {&dividend, &divisor}) {
    if (!v->nullish() && !v->number()) FailType(*v, "a number");
  }
  if (dividend.nullish() || divisor.nullish()) return Scalar(std::monostate{}, &e);
  double d = ToDouble(divisor.scalar);
  if (d == 0) return Scalar(std::monostate{}, &e);
  return Scalar(ToDouble(dividend.scalar) / d, &e);
}

Val Count(const Expression& e, const Val& scope) {
  Val v = Field(e.path, scope, &e);
  if (v.nullish()) return Scalar(int32_t{0}, &e);
  if (v.kind != Val::Kind::kList)
    throw Failure{"'" + e.path + "' is " + TypeName(v) + ", expected an array"};
  return Scalar(static_cast<int32_t>(v.list.size()), &e);
}

Val MinMax(const Expression& e, const Val& scope, bool max) {
  const Val* best = nullptr;
  std::vector<Val> values = Operands(e, scope);
  for (const Val& v : values) {
    if (v.nullish()) continue;
    if (v.kind != Val::Kind::kScalar) FailType(v, "a number, string, boolean or date");
    if (!best) {
      best = &v;
      continue;
    }
    int c = CompareValues(v.scalar, best->scalar);
    if (max ? c > 0 : c < 0) best = &v;  // ties keep the first
  }
  if (!best) return Scalar(std::monostate{}, &e);
  return Scalar(best->scalar, &e);
}

Val Concat(const Expression& e, const Val& scope) {
  std::vector<Val> values = Operands(e, scope);
  bool null = false;
  size_t size = 0;
  for (const Val& v : values) {
    if (v.nullish()) null = true;
    else if (v.kind != Val::Kind::kScalar || !std::holds_alternative<std::string>(v.scalar))
      FailType(v, "a string");
    else size += std::get<std::string>(v.scalar).size();
  }
  if (null) return Scalar(std::monostate{}, &e);
  if (size > kMaxStringBytes) throw Failure{"the concatenation is longer than 16 MiB"};
  std::string out;
  out.reserve(size);
  for (const Val& v : values) out += std::get<std::string>(v.scalar);
  return Scalar(std::move(out), &e);
}

// Piece `index` of the string split at the separator, as $split then
// $arrayElemAt do (a negative index counts from the end).
Val Part(const Expression& e, const Val& scope) {
  Val of = Eval(e.operands.at(0), scope);
  if (of.nullish()) return Scalar(std::monostate{}, &e);
  if (of.kind != Val::Kind::kScalar || !std::holds_alternative<std::string>(of.scalar))
    FailType(of, "a string");
  const std::string& text = std::get<std::string>(of.scalar);
  const std::string& separator = std::get<std::string>(e.literal);
  std::vector<std::string> pieces;
  size_t start = 0;
  for (size_t at; (at = text.find(separator, start)) != std::string::npos; start = at + separator.size())
    pieces.push_back(text.substr(start, at - start));
  pieces.push_back(text.substr(start));
  const int64_t count = static_cast<int64_t>(pieces.size());
  const int64_t i = e.index < 0 ? count + e.index : e.index;
  if (i < 0 || i >= count) return Scalar(std::monostate{}, &e);
  return Scalar(std::move(pieces[static_cast<size_t>(i)]), &e);
}

// A list: operands[0] evaluated on each element of the array at `path`;
// missing or null when the array is.
Val Each(const Expression& e, const Val& scope) {
  Val source = Field(e.path, scope, &e);
  if (source.nullish()) return source;
  if (source.kind != Val::Kind::kList)
    throw Failure{"'" + e.path + "' is " + TypeName(source) + ", expected an array"};
  Val out;
  out.kind = Val::Kind::kList;
  out.from = &e;
  out.list.reserve(source.list.size());
  for (const Val& element : source.list) out.list.push_back(Eval(e.operands.at(0), element));
  return out;
}

Val Eval(const Expression& e, const Val& scope) {
  switch (e.kind) {
    case Expression::Kind::kField: return Field(e.path, scope, &e);
    case Expression::Kind::kLiteral: return Scalar(LiteralValue(e.literal), &e);
    case Expression::Kind::kSum: return Sum(e, scope);
    case Expression::Kind::kProduct: return Product(e, scope);
    case Expression::Kind::kDivide: return Divide(e, scope);
    case Expression::Kind::kCount: return Count(e, scope);
    case Expression::Kind::kMin: return MinMax(e, scope, false);
    case Expression::Kind::kMax: return MinMax(e, scope, true);
    case Expression::Kind::kConcat: return Concat(e, scope);
    case Expression::Kind::kEach: return Each(e, scope);
    case Expression::Kind::kPart: return Part(e, scope);
  }
  throw Failure{"unknown expression kind"};
}

bool NearlyEqual(double x, double y) {
  if (x == y) return true;
  if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && std::isnan(y);
  if (std::isinf(x) || std::isinf(y)) return false;
  double diff = std::fabs(x - y);
  return diff <= 1e-12 || diff <= 1e-9 * std::max(std::fabs(x), std::fabs(y));
}

bool IsNumber(const ComputedValue& v) {
  return std::holds_alternative<int32_t>(v) || std::holds_alternative<int64_t>(v) ||
         std::holds_alternative<double>(v);
}

}  // namespace

std::variant<ComputedValue, EvaluationError> Evaluate(const Expression& expression,
                                                      const bson_t* document) {
  try {
    Val scope;
    scope.kind = Val::Kind::kDocument;
    scope.data = bson_get_data(document);
    scope.length = document->len;
    Val v = Eval(expression, scope);
    switch (v.kind) {
      case Val::Kind::kMissing: return ComputedValue{std::monostate{}};
      case Val::Kind::kScalar: return std::move(v.scalar);
      case Val::Kind::kList:
      case Val::Kind::kDocument: FailType(v, "a single value");
      case Val::Kind::kOther: FailType(v, "a number, string, boolean, date or null");
    }
    return ComputedValue{};
  } catch (const Failure& f) {
    return EvaluationError{f.message};
  }
}

std::optional<ComputedValue> ValueOf(const bson_iter_t* element) {
  switch (bson_iter_type(element)) {
    case BSON_TYPE_NULL: return ComputedValue{std::monostate{}};
    case BSON_TYPE_BOOL: return ComputedValue{bson_iter_bool(element)};
    case BSON_TYPE_INT32: return ComputedValue{bson_iter_int32(element)};
    case BSON_TYPE_INT64: return ComputedValue{bson_iter_int64(element)};
    case BSON_TYPE_DOUBLE: return ComputedValue{bson_iter_double(element)};
    case BSON_TYPE_UTF8: {
      uint32_t length = 0;
      const char* text = bson_iter_utf8(element, &length);
      return ComputedValue{std::string(text, length)};
    }
    case BSON_TYPE_DATE_TIME: return ComputedValue{DateMs{bson_iter_date_time(element)}};
    default: return std::nullopt;
  }
}

void AppendComputedValue(bson_t* out, std::string_view key, const ComputedValue& value) {
  const char* k = key.data();
  int n = static_cast<int>(key.size());
  struct {
    bson_t* out;
    const char* k;
    int n;
    void operator()(std::monostate) const { bson_append_null(out, k, n); }
    void operator()(bool b) const { bson_append_bool(out, k, n, b); }
    void operator()(int32_t i) const { bson_append_int32(out, k, n, i); }
    void operator()(int64_t i) const { bson_append_int64(out, k, n, i); }
    void operator()(double d) const { bson_append_double(out, k, n, d); }
    void operator()(const std::string& s) const {
      bson_append_utf8(out, k, n, s.data(), static_cast<int>(s.size()));
    }
    void operator()(DateMs d) const { bson_append_date_time(out, k, n, d.ms); }
  } append{out, k, n};
  std::visit(append, value);
}

bool HoldsValue(const bson_iter_t* stored, const ComputedValue& value) {
  if (!stored) return std::holds_alternative<std::monostate>(value);
  std::optional<ComputedValue> have = ValueOf(stored);
  if (!have) return false;
  if (IsNumber(*have) && IsNumber(value)) {
    if (std::holds_alternative<double>(*have) || std::holds_alternative<double>(value))
      return NearlyEqual(ToDouble(*have), ToDouble(value));
    return CompareNumbers(*have, value) == 0;
  }
  return *have == value;
}

std::string DescribeValue(const ComputedValue& value) {
  struct {
    std::string operator()(std::monostate) const { return "null"; }
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(int32_t i) const { return std::to_string(i); }
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const {
      if (std::isnan(d)) return "NaN";
      if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
      char buffer[64];
      auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, d);
      std::string text(buffer, ec == std::errc() ? end : buffer);
      if (text.find_first_of(".e") == std::string::npos) text += ".0";  // 3.0, not 3
      return text;
    }
    std::string operator()(const std::string& s) const { return JsonQuote(s); }
    std::string operator()(DateMs d) const { return "Date(" + std::to_string(d.ms) + ")"; }
  } describe;
  return std::visit(describe, value);
}

}  // namespace remold
