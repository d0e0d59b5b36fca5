// The parsing context shared by the rule loaders: the file being read, and
// failures reported as "FILE:LINE: what is wrong, what was expected".
// Internal to rules/.
#pragma once

#include <yaml-cpp/yaml.h>

#include <set>
#include <string>
#include <vector>

#include "rules/namespace.h"

namespace remold {

// Thrown inside the loader only; becomes one line of RuleLoadResult::errors.
struct RuleError {
  std::string message;
};

class FileContext {
 public:
  explicit FileContext(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void Fail(const YAML::Node& node, const std::string& message) const {
    int line = node.Mark().line >= 0 ? node.Mark().line + 1 : 1;
    throw RuleError{source_ + ":" + std::to_string(line) + ": " + message};
  }

  void CheckKeys(const YAML::Node& map, const std::string& where,
                 const std::set<std::string>& allowed) const {
    for (const auto& entry : map) {
      std::string key = entry.first.as<std::string>();
      if (!allowed.count(key)) {
        std::string list;
        for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
        Fail(entry.first, "unknown key '" + key + "' in " + where + ", expected one of: " + list);
      }
    }
  }

  std::string String(const YAML::Node& parent, const std::string& key, const std::string& where) const {
    YAML::Node node = parent[key];
    if (!node) Fail(parent, "missing '" + key + "' in " + where + ", expected a string");
    if (!node.IsScalar()) Fail(node, "'" + key + "' must be a string");
    return node.as<std::string>();
  }

  std::string OptionalString(const YAML::Node& parent, const std::string& key,
                             const std::string& fallback) const {
    YAML::Node node = parent[key];
    if (!node) return fallback;
    if (!node.IsScalar()) Fail(node, "'" + key + "' must be a string");
    return node.as<std::string>();
  }

  std::vector<std::string> StringList(const YAML::Node& parent, const std::string& key) const {
    std::vector<std::string> out;
    YAML::Node node = parent[key];
    if (!node) return out;
    if (!node.IsSequence()) Fail(node, "'" + key + "' must be a list of field names");
    for (const auto& item : node) {
      if (!item.IsScalar()) Fail(item, "'" + key + "' must be a list of field names");
      out.push_back(item.as<std::string>());
    }
    return out;
  }

  void CheckFieldName(const YAML::Node& node, const std::string& name, const std::string& what) const {
    if (name.empty() || name.find('.') != std::string::npos || name[0] == '$')
      Fail(node, what + " '" + name + "' must be a top-level field name (no '.', not starting with '$')");
  }

 private:
  std::string source_;
};

inline Namespace ParseNamespace(const FileContext& ctx, const YAML::Node& node, const std::string& text) {
  size_t dot = text.find('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == text.size() ||
      text.find('$') != std::string::npos)
    ctx.Fail(node, "namespace '" + text + "' must be 'database.collection'");
  return {text.substr(0, dot), text.substr(dot + 1)};
}

inline bool ParseBool(const FileContext& ctx, const YAML::Node& parent, const std::string& key,
               bool fallback) {
  YAML::Node node = parent[key];
  if (!node) return fallback;
  std::string text = node.IsScalar() ? node.as<std::string>() : "";
  if (text == "true") return true;
  if (text == "false") return false;
  ctx.Fail(node, "'" + key + "' must be true or false");
}


}  // namespace remold
