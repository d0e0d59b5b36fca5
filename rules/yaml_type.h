// The type of a YAML value by the YAML 1.2 core schema, so a rule key that
// takes one type refuses the others instead of converting them: `array: 5`
// is the integer 5, not the name "5"; `array: "5"` (quoted) is the name.
// Internal to rules/ and the patterns' rule parsers.
#pragma once

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <regex>
#include <string>
#include <string_view>

namespace remold {

enum class YamlType { kNull, kBool, kInt, kFloat, kString, kList, kMapping, kOtherTag };

// The core schema's integers and floats, matched by hand: std::regex
// recurses once per character and overflows the stack on a long scalar (a
// plain scalar of 40,000 digits crashed remold as it loaded the file).
// Exactly these regular expressions (tests/golden/loader_yaml_type_test.cc):
//   int    [-+]?[0-9]+ | 0o[0-7]+ | 0x[0-9a-fA-F]+
//   float  [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? | [-+]?\.(inf|Inf|INF)
//          | \.nan | \.NaN | \.NAN
inline bool IsCoreDigit(char c) { return c >= '0' && c <= '9'; }

inline bool IsCoreInt(std::string_view text) {
  const auto all = [](std::string_view chars, auto is) {
    return !chars.empty() && std::all_of(chars.begin(), chars.end(), is);
  };
  if (text.starts_with("0o")) return all(text.substr(2), [](char c) { return c >= '0' && c <= '7'; });
  if (text.starts_with("0x"))
    return all(text.substr(2), [](char c) {
      return IsCoreDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    });
  if (text.starts_with('-') || text.starts_with('+')) text.remove_prefix(1);
  return all(text, IsCoreDigit);
}

inline bool IsCoreFloat(std::string_view text) {
  if (text == ".nan" || text == ".NaN" || text == ".NAN") return true;
  if (text.starts_with('-') || text.starts_with('+')) text.remove_prefix(1);
  if (text == ".inf" || text == ".Inf" || text == ".INF") return true;
  size_t at = 0;
  const auto digits = [&] {  // how many digits from `at` on, skipped
    const size_t start = at;
    while (at < text.size() && IsCoreDigit(text[at])) ++at;
    return at - start;
  };
  if (text.starts_with('.')) {
    ++at;
    if (digits() == 0) return false;
  } else {
    if (digits() == 0) return false;
    if (at < text.size() && text[at] == '.') {
      ++at;
      digits();
    }
  }
  if (at < text.size() && (text[at] == 'e' || text[at] == 'E')) {
    ++at;
    if (at < text.size() && (text[at] == '-' || text[at] == '+')) ++at;
    if (digits() == 0) return false;
  }
  return at == text.size();
}

inline YamlType TypeOf(const YAML::Node& node) {
  if (!node || node.IsNull()) return YamlType::kNull;
  if (node.IsSequence()) return YamlType::kList;
  if (node.IsMap()) return YamlType::kMapping;
  const std::string& tag = node.Tag();
  const std::string& text = node.Scalar();
  constexpr const char* kCore = "tag:yaml.org,2002:";
  if (tag == "!" || tag == std::string(kCore) + "str") return YamlType::kString;  // quoted
  if (tag == std::string(kCore) + "int") return YamlType::kInt;
  if (tag == std::string(kCore) + "float") return YamlType::kFloat;
  if (tag == std::string(kCore) + "bool") return YamlType::kBool;
  if (tag == std::string(kCore) + "null") return YamlType::kNull;
  if (tag != "?") return YamlType::kOtherTag;
  // A plain scalar: resolved as the core schema does.
  static const std::regex kNullText("null|Null|NULL|~|");
  static const std::regex kBoolText("true|True|TRUE|false|False|FALSE");
  if (std::regex_match(text, kNullText)) return YamlType::kNull;
  if (std::regex_match(text, kBoolText)) return YamlType::kBool;
  if (IsCoreInt(text)) return YamlType::kInt;
  if (IsCoreFloat(text)) return YamlType::kFloat;
  return YamlType::kString;
}

// What the value is, for messages: "the integer 5", "a list", ...
inline std::string Found(const YAML::Node& node) {
  switch (TypeOf(node)) {
    case YamlType::kNull: return "null (no value)";
    case YamlType::kBool: return "the boolean " + node.Scalar();
    case YamlType::kInt: return "the integer " + node.Scalar();
    case YamlType::kFloat: return "the number " + node.Scalar();
    case YamlType::kString: return "the string '" + node.Scalar() + "'";
    case YamlType::kList: return node.size() == 0 ? "an empty list" : "a list";
    case YamlType::kMapping: return node.size() == 0 ? "an empty mapping" : "a mapping";
    case YamlType::kOtherTag: return "a value tagged " + node.Tag();
  }
  return "a value";
}

// For a plain scalar that is not a string (5, 1.5, true): how to write it
// as text; empty otherwise.
inline std::string QuoteHint(const YAML::Node& node) {
  YamlType type = TypeOf(node);
  bool plain = node && node.IsScalar() && node.Tag() == "?";
  if (!plain || (type != YamlType::kBool && type != YamlType::kInt && type != YamlType::kFloat))
    return "";
  return " (write \"" + node.Scalar() + "\" for the text " + node.Scalar() + ")";
}

}  // namespace remold
