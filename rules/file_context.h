// The parsing context shared by the rule loaders: the file being read, and
// the mistakes found in it, each reported as
//   FILE:LINE: what is wrong, what was expected
// A parse reports every mistake it can, not only the first: Report()
// records one and goes on; Fail() records one and abandons the current
// Step() (the rest of the parse goes on). A file with any mistake yields no
// rule. Values are typed strictly (rules/yaml_type.h): `array: 5` is not
// the string "5". Internal to rules/ and the patterns' rule parsers.
#pragma once

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "rules/namespace.h"
#include "rules/yaml_type.h"

namespace remold {

// Thrown by FileContext::Fail, caught by FileContext::Step (and by the
// loader around a whole file).
struct RuleError {
  int line;
  std::string message;  // without "FILE:LINE: "
};

class FileContext {
 public:
  explicit FileContext(std::string source) : source_(std::move(source)) {}

  // Records a mistake at `node`'s line; the parse goes on.
  void Report(const YAML::Node& node, const std::string& message) const {
    Record(LineOf(node), message);
  }
  // Records a mistake at `node`'s line and abandons the current Step.
  [[noreturn]] void Fail(const YAML::Node& node, const std::string& message) const {
    throw RuleError{LineOf(node), message};
  }
  // Runs one step of the parse; a Fail inside it ends the step, not the
  // parse. True when the step finished and reported nothing.
  template <typename Fn>
  bool Step(Fn&& step) const {
    size_t before = errors_.size();
    try {
      step();
    } catch (const RuleError& e) {
      Record(e.line, e.message);
    } catch (const YAML::Exception& e) {
      Record(e.mark.line + 1, "invalid YAML: " + e.msg);
    }
    return errors_.size() == before;
  }

  bool HasErrors() const { return !errors_.empty(); }
  // Every mistake as "FILE:LINE: message", by line (then as found).
  std::vector<std::string> Errors() const {
    std::vector<std::pair<int, std::string>> sorted = errors_;
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<std::string> out;
    for (const auto& [line, message] : sorted) {
      std::string text = source_ + ":" + std::to_string(line) + ": " + message;
      if (std::find(out.begin(), out.end(), text) == out.end()) out.push_back(text);
    }
    return out;
  }

  // Reports every key of `map` not in `allowed`, and every key given twice
  // (YAML would silently keep the first).
  void CheckKeys(const YAML::Node& map, const std::string& where,
                 const std::set<std::string>& allowed) const {
    std::string list;
    for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
    std::set<std::string> seen;
    for (const auto& entry : map) {
      if (!entry.first.IsScalar())
        Report(entry.first, "a key in " + where + " is " + Found(entry.first) + ", expected one of: " + list);
      else if (!allowed.count(entry.first.Scalar()))
        Report(entry.first, "unknown key '" + entry.first.Scalar() + "' in " + where +
                                ", expected one of: " + list);
      else if (!seen.insert(entry.first.Scalar()).second)
        Report(entry.first, "key '" + entry.first.Scalar() + "' is given twice in " + where +
                                ", expected each key once");
    }
  }

  // `node`'s value, which must be a string; `what` names it in the message.
  // When a name is expected, a plain 5 or true gets the advice to quote it.
  std::string StringValue(const YAML::Node& node, const std::string& what,
                          const std::string& expected = "a string") const {
    if (TypeOf(node) != YamlType::kString) {
      static const std::regex kName("\\bname\\b");
      bool name = expected == "a string" || std::regex_search(expected, kName);
      Fail(node, what + " is " + Found(node) + ", expected " + expected + (name ? QuoteHint(node) : ""));
    }
    return node.Scalar();
  }

  // The string at `key`: required (missing: "missing 'key' in WHERE").
  std::string String(const YAML::Node& parent, const std::string& key, const std::string& where,
                     const std::string& expected = "a string") const {
    YAML::Node node = parent[key];
    if (!node) Fail(parent, "missing '" + key + "' in " + where + ", expected " + expected);
    return StringValue(node, "'" + key + "'", expected);
  }

  // The string at `key`, or `fallback` when the key is absent.
  std::string OptionalString(const YAML::Node& parent, const std::string& key,
                             const std::string& fallback,
                             const std::string& expected = "a string") const {
    YAML::Node node = parent[key];
    if (!node) return fallback;
    return StringValue(node, "'" + key + "'", expected);
  }

  // The list of strings at `key` (absent: empty). Each item of another type
  // is reported; the others are returned.
  std::vector<std::string> StringList(const YAML::Node& parent, const std::string& key) const {
    std::vector<std::string> out;
    YAML::Node node = parent[key];
    if (!node) return out;
    if (!node.IsSequence())
      Fail(node, "'" + key + "' is " + Found(node) + ", expected a list of field names");
    for (const auto& item : node) {
      if (TypeOf(item) == YamlType::kString) {
        out.push_back(item.Scalar());
      } else {
        Report(item, "an item of '" + key + "' is " + Found(item) + ", expected a field name" +
                         QuoteHint(item));
      }
    }
    return out;
  }

  // A mapping key that names a field: it must be a string.
  std::string KeyName(const YAML::Node& key, const std::string& what) const {
    if (TypeOf(key) != YamlType::kString) {
      std::string named = key.IsScalar() ? what + " " + key.Scalar() : "the name of a " + what;
      Fail(key, named + " is " + Found(key) + ", expected a field name" + QuoteHint(key));
    }
    return key.Scalar();
  }

  // Reports a name that is not a top-level field name; false if reported.
  bool CheckFieldName(const YAML::Node& node, const std::string& name, const std::string& what) const {
    if (name.empty() || name.find('.') != std::string::npos || name[0] == '$') {
      Report(node, what + " '" + name + "' must be a top-level field name (no '.', not starting with '$')");
      return false;
    }
    if (name.find('\0') != std::string::npos) {  // a BSON key ends at its first NUL
      Report(node, what + " must not contain a NUL character");
      return false;
    }
    return true;
  }

 private:
  static int LineOf(const YAML::Node& node) {
    return node.Mark().line >= 0 ? node.Mark().line + 1 : 1;
  }
  void Record(int line, const std::string& message) const { errors_.emplace_back(line, message); }

  std::string source_;
  // Mistakes are recorded through a const context: reporting one does not
  // change what is being parsed.
  mutable std::vector<std::pair<int, std::string>> errors_;
};

inline Namespace ParseNamespace(const FileContext& ctx, const YAML::Node& node, const std::string& text) {
  // MongoDB allows no NUL in a database or collection name (and the BSON
  // strings remold writes them into would end there).
  if (text.find('\0') != std::string::npos) ctx.Fail(node, "a namespace must not contain a NUL character");
  size_t dot = text.find('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == text.size() ||
      text.find('$') != std::string::npos)
    ctx.Fail(node, "namespace '" + text + "' must be 'database.collection'");
  return {text.substr(0, dot), text.substr(dot + 1)};
}

// The boolean at `key`, or `fallback` when the key is absent.
inline bool ParseBool(const FileContext& ctx, const YAML::Node& parent, const std::string& key,
                      bool fallback) {
  YAML::Node node = parent[key];
  if (!node) return fallback;
  if (TypeOf(node) != YamlType::kBool)
    ctx.Fail(node, "'" + key + "' is " + Found(node) + ", expected true or false");
  return node.Scalar()[0] == 't' || node.Scalar()[0] == 'T';
}

}  // namespace remold
