#include "rules/loader.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "rules/file_context.h"
#include "rules/rule.h"

namespace remold {
namespace {

// Every mistake of the file goes to ctx; nullopt when there is any.
std::optional<Rule> ParseRule(const YAML::Node& root, const std::string& source,
                              const FileContext& ctx) {
  std::set<std::string> root_keys = {"namespace", "pattern"};
  std::string pattern_names;
  ForEachPatternType([&]<typename R>() {
    root_keys.emplace(R::kName);
    pattern_names += (pattern_names.empty() ? "" : ", ") + std::string(R::kName);
  });
  if (!root.IsMap()) {
    ctx.Report(root, "a rule file must be a mapping with 'namespace' and 'pattern'");
    return std::nullopt;
  }
  ctx.CheckKeys(root, "the rule", root_keys);
  // A bad namespace does not stop the section's checks: they use it only
  // for names derived from it.
  Namespace logical;
  ctx.Step([&] {
    std::string ns_text = ctx.String(root, "namespace", "the rule", "'database.collection'");
    logical = ParseNamespace(ctx, root["namespace"], ns_text);
  });
  std::string pattern;
  if (!ctx.Step([&] { pattern = ctx.String(root, "pattern", "the rule", "one of: " + pattern_names); }))
    return std::nullopt;

  Rule rule;
  rule.name = std::filesystem::path(source).stem().string();
  rule.source = source;
  bool known = false;
  ForEachPatternType([&]<typename R>() {
    if (known || pattern != R::kName) return;
    known = true;
    YAML::Node section = root[pattern];
    if (!section) {
      ctx.Report(root, "missing '" + pattern + "' section, expected the " + pattern + " rule's options");
    } else if (!section.IsMap()) {
      ctx.Report(section, "'" + pattern + "' is " + Found(section) + ", expected a mapping of options");
    } else {
      ctx.Step([&] { rule.pattern = R::Parse(ctx, section, logical); });
    }
  });
  if (!known) {
    ctx.Report(root["pattern"], "unknown pattern '" + pattern + "', expected: " + pattern_names);
    return std::nullopt;
  }
  for (const auto& entry : root) {
    std::string key = entry.first.Scalar();
    if (key != "namespace" && key != "pattern" && key != pattern && root_keys.count(key))
      ctx.Report(entry.first, "section '" + key + "' does not belong to pattern '" + pattern + "'");
  }
  if (ctx.HasErrors()) return std::nullopt;
  return rule;
}

void ParseInto(const std::string& text, const std::string& source, std::vector<Rule>& rules,
               std::vector<std::string>& errors) {
  FileContext ctx(source);
  std::optional<Rule> rule;
  try {
    YAML::Node root = YAML::Load(text);
    ctx.Step([&] { rule = ParseRule(root, source, ctx); });
  } catch (const YAML::Exception& e) {
    errors.push_back(source + ":" + std::to_string(e.mark.line + 1) + ": invalid YAML: " + e.msg);
    return;
  }
  for (auto& error : ctx.Errors()) errors.push_back(std::move(error));
  if (rule && !ctx.HasErrors()) rules.push_back(std::move(*rule));
}

RuleLoadResult Finish(std::vector<Rule> rules, std::vector<std::string> errors) {
  std::map<std::string, std::string> owner;
  for (const Rule& rule : rules) {
    std::string ns = rule.logical().full();
    auto [it, fresh] = owner.emplace(ns, rule.source);
    if (!fresh)
      errors.push_back(rule.source + ":1: namespace '" + ns + "' already has a rule in " +
                       it->second + ", expected one rule file per collection");
  }
  // A collection a rule writes directly must not be another rule's.
  for (const Rule& rule : rules) {
    auto written = std::visit([](const auto& p) { return p.Writes(); }, rule.pattern);
    for (const WrittenNamespace& w : written) {
      auto it = owner.find(w.ns.full());
      if (it != owner.end()) errors.push_back(rule.source + ":1: " + w.conflict(it->second));
    }
  }
  RuleLoadResult result;
  result.errors = std::move(errors);
  if (result.errors.empty()) result.rules = std::make_shared<const RuleSet>(std::move(rules));
  return result;
}

}  // namespace

RuleLoadResult LoadRuleText(const std::string& text, const std::string& source) {
  std::vector<Rule> rules;
  std::vector<std::string> errors;
  ParseInto(text, source, rules, errors);
  return Finish(std::move(rules), std::move(errors));
}

RuleLoadResult LoadRuleDirectory(const std::string& directory) {
  namespace fs = std::filesystem;
  std::vector<Rule> rules;
  std::vector<std::string> errors;
  std::error_code ec;
  if (!fs::is_directory(directory, ec)) {
    return {nullptr, {directory + ": not a directory, expected the rules directory"}};
  }
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(directory, ec)) {
    const fs::path& path = entry.path();
    std::string name = path.filename().string();
    if (name.empty() || name[0] == '.') continue;  // hidden, and Kubernetes' ..data links
    if (path.extension() != ".yaml" && path.extension() != ".yml") continue;
    if (!fs::is_regular_file(path, ec)) continue;
    files.push_back(path);
  }
  if (ec) return {nullptr, {directory + ": cannot list: " + ec.message()}};
  std::sort(files.begin(), files.end());
  for (const auto& path : files) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    if (!in) {
      errors.push_back(path.string() + ":1: cannot read the file");
      continue;
    }
    ParseInto(text.str(), path.string(), rules, errors);
  }
  return Finish(std::move(rules), std::move(errors));
}

}  // namespace remold
