// The expression parser (expression.h): a rule file's YAML -> Expression.
#include "patterns/expression/expression.h"

#include <yaml-cpp/yaml.h>

#include <cctype>
#include <charconv>
#include <map>
#include <optional>

#include "rules/file_context.h"

namespace remold {
namespace {

constexpr int kMaxExpressionDepth = 32;

const std::map<std::string, Expression::Kind>& OperatorNames() {
  static const std::map<std::string, Expression::Kind> kNames = {
      {"sum", Expression::Kind::kSum},         {"product", Expression::Kind::kProduct},
      {"divide", Expression::Kind::kDivide},   {"count", Expression::Kind::kCount},
      {"min", Expression::Kind::kMin},         {"max", Expression::Kind::kMax},
      {"concat", Expression::Kind::kConcat},   {"each", Expression::Kind::kEach},
      {"literal", Expression::Kind::kLiteral}, {"part", Expression::Kind::kPart},
  };
  return kNames;
}

std::string OperatorList() {
  std::string list;
  for (const auto& [name, kind] : OperatorNames()) list += (list.empty() ? "" : ", ") + name;
  return list;
}

void CheckPath(const FileContext& ctx, const YAML::Node& node, const std::string& path) {
  bool bad = path.empty() || path.front() == '.' || path.back() == '.' ||
             path.find("..") != std::string::npos || path.find('$') != std::string::npos;
  if (bad) ctx.Fail(node, "field path '" + path + "' must be field names joined by '.', without '$'");
}

std::string TopLevel(const std::string& path) { return path.substr(0, path.find('.')); }

std::optional<Expression::Literal> NumberLiteral(const std::string& text) {
  // from_chars also reads "nan", "inf" and "infinity": those are field names.
  size_t first = !text.empty() && text[0] == '-' ? 1 : 0;
  if (first < text.size() && std::isalpha(static_cast<unsigned char>(text[first]))) return std::nullopt;
  int64_t i = 0;
  auto [iend, iec] = std::from_chars(text.data(), text.data() + text.size(), i);
  if (iec == std::errc() && iend == text.data() + text.size()) return Expression::Literal{i};
  double d = 0;
  auto [dend, dec] = std::from_chars(text.data(), text.data() + text.size(), d);
  if (dec == std::errc() && dend == text.data() + text.size()) return Expression::Literal{d};
  return std::nullopt;
}

Expression::Literal ParseLiteral(const FileContext& ctx, const YAML::Node& node) {
  if (!node.IsScalar() && !node.IsNull()) ctx.Fail(node, "'literal' must be a number, string, true, false or null");
  if (node.IsNull()) return std::monostate{};
  std::string text = node.as<std::string>();
  if (node.Tag() != "!") {  // plain scalars may be numbers or booleans; quoted ones are strings
    if (text == "true") return true;
    if (text == "false") return false;
    if (auto number = NumberLiteral(text)) return *number;
  }
  return text;
}

Expression ParseNode(const FileContext& ctx, const YAML::Node& node, int depth, bool in_each,
                     std::set<std::string>& inputs);

// {part: {of: <expression>, by: <separator>, index: <integer>}}
Expression ParsePart(const FileContext& ctx, const YAML::Node& spec, int depth, bool in_each,
                     std::set<std::string>& inputs) {
  Expression e;
  e.kind = Expression::Kind::kPart;
  if (!spec.IsMap()) ctx.Fail(spec, "'part' must be a mapping {of, by, index}");
  ctx.CheckKeys(spec, "'part'", {"of", "by", "index"});
  if (!spec["of"] || !spec["by"]) ctx.Fail(spec, "'part' needs 'of' (the string) and 'by' (the separator)");
  e.operands.push_back(ParseNode(ctx, spec["of"], depth + 1, in_each, inputs));
  std::string by = ctx.StringValue(spec["by"], "'by'", "the separator, a string");
  if (by.empty()) ctx.Fail(spec["by"], "'by' must not be empty");
  e.literal = by;
  if (spec["index"]) {
    std::optional<Expression::Literal> index;
    if (spec["index"].IsScalar()) index = NumberLiteral(spec["index"].Scalar());
    if (!index || !std::holds_alternative<int64_t>(*index) || std::get<int64_t>(*index) > 1000000 ||
        std::get<int64_t>(*index) < -1000000)
      ctx.Fail(spec["index"], "'index' must be an integer (0 is the first piece, -1 the last)");
    e.index = std::get<int64_t>(*index);
  }
  return e;
}

// `inputs` collects the top-level document fields the expression reads;
// inside `each`, paths name fields of the array element instead.
Expression ParseNode(const FileContext& ctx, const YAML::Node& node, int depth, bool in_each,
                     std::set<std::string>& inputs) {
  if (depth > kMaxExpressionDepth) ctx.Fail(node, "expression nested too deeply (at most 32 levels)");
  Expression e;
  if (TypeOf(node) == YamlType::kBool)
    ctx.Fail(node, "an expression is " + Found(node) + ", expected a field path, a number, or {literal: " +
                       node.Scalar() + "} for the value");
  if (node.IsScalar()) {
    std::string text = node.as<std::string>();
    if (node.Tag() != "!") {
      if (auto number = NumberLiteral(text)) {
        e.kind = Expression::Kind::kLiteral;
        e.literal = *number;
        return e;
      }
    }
    CheckPath(ctx, node, text);
    e.kind = Expression::Kind::kField;
    e.path = text;
    if (!in_each) inputs.insert(TopLevel(text));
    return e;
  }
  if (!node.IsMap() || node.size() == 0)
    ctx.Fail(node, "an expression must be a field path, a number, or a mapping with one of: " +
                       OperatorList());
  // YAML mappings are unordered: {of: ..., each: ...} is an each too.
  if (!node.begin()->first.IsScalar())
    ctx.Fail(node.begin()->first, "an expression operator is " + Found(node.begin()->first) +
                                      ", expected one of: " + OperatorList());
  std::string op = node["each"] ? "each" : node.begin()->first.Scalar();
  auto it = OperatorNames().find(op);
  if (it == OperatorNames().end())
    ctx.Fail(node.begin()->first, "unknown expression operator '" + op + "', expected one of: " +
                                      OperatorList());
  e.kind = it->second;
  const YAML::Node value = node[op];
  if (e.kind == Expression::Kind::kEach) {
    ctx.CheckKeys(node, "'each'", {"each", "of"});
    e.path = ctx.StringValue(value, "'each'", "the name of an array field");
    CheckPath(ctx, value, e.path);
    if (!in_each) inputs.insert(TopLevel(e.path));
    if (!node["of"]) ctx.Fail(node, "'each' needs 'of', the expression for one element");
    e.operands.push_back(ParseNode(ctx, node["of"], depth + 1, true, inputs));
    return e;
  }
  if (node.size() != 1)
    ctx.Fail(node, "an expression mapping has one operator, found " + std::to_string(node.size()) + " keys");
  switch (e.kind) {
    case Expression::Kind::kPart:
      return ParsePart(ctx, value, depth, in_each, inputs);
    case Expression::Kind::kLiteral:
      e.literal = ParseLiteral(ctx, value);
      return e;
    case Expression::Kind::kCount:
      e.path = ctx.StringValue(value, "'count'", "the name of an array field");
      CheckPath(ctx, value, e.path);
      if (!in_each) inputs.insert(TopLevel(e.path));
      return e;
    default:
      break;
  }
  if (value.IsSequence()) {
    for (const auto& item : value) e.operands.push_back(ParseNode(ctx, item, depth + 1, in_each, inputs));
  } else {
    e.operands.push_back(ParseNode(ctx, value, depth + 1, in_each, inputs));
  }
  if (e.operands.empty()) ctx.Fail(value, "'" + op + "' needs at least one operand");
  if (e.kind == Expression::Kind::kDivide && e.operands.size() != 2)
    ctx.Fail(value, "'divide' takes exactly two operands: [dividend, divisor]");
  return e;
}

}  // namespace

Expression ParseExpression(const FileContext& ctx, const YAML::Node& node,
                           std::set<std::string>& inputs) {
  return ParseNode(ctx, node, 0, false, inputs);
}

}  // namespace remold
