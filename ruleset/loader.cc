#include "ruleset/loader.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <type_traits>

#include "rules/file_context.h"
#include "ruleset/rule.h"
#include "ruleset/utf8_text.h"

namespace remold {
namespace {

// The names of the patterns that satisfy `Is`, for messages.
template <template <typename> class Is>
std::string PatternsThat() {
  std::string names;
  ForEachPatternType([&]<typename R>() {
    if constexpr (Is<R>::value) names += (names.empty() ? "" : ", ") + std::string(R::kName);
  });
  return names.empty() ? "none" : names;
}
template <typename R>
struct CanBeUpper : std::bool_constant<StackUpperRule<R>> {};
template <typename R>
struct CanBeLower : std::bool_constant<StackLowerRule<R>> {};

// The `pattern` of a rule file: a name, or a stack of two, top first.
std::vector<std::string> PatternList(const FileContext& ctx, const YAML::Node& root,
                                     const std::string& pattern_names) {
  const std::string expected = "one of: " + pattern_names + ", or a stack of two: [upper, lower]";
  YAML::Node node = root["pattern"];
  if (!node || !node.IsSequence()) return {ctx.String(root, "pattern", "the rule", expected)};
  std::vector<std::string> names;
  for (const auto& item : node) names.push_back(ctx.StringValue(item, "an item of 'pattern'", expected));
  if (names.size() != 2)
    ctx.Fail(node, "'pattern' is a stack of " + std::to_string(names.size()) +
                       " rules, expected two: [upper, lower]");
  if (names[0] == names[1]) ctx.Fail(node, "'pattern' stacks '" + names[0] + "' on itself");
  return names;
}

// The rule of the section of `pattern` (a known one), or nullopt (reported).
std::optional<PatternRule> ParseSection(const FileContext& ctx, const YAML::Node& root,
                                        const std::string& pattern, const Namespace& logical) {
  std::optional<PatternRule> parsed;
  ForEachPatternType([&]<typename R>() {
    if (pattern != R::kName) return;
    YAML::Node section = root[pattern];
    if (!section) {
      ctx.Report(root, "missing '" + pattern + "' section, expected the " + pattern + " rule's options");
    } else if (!section.IsMap()) {
      ctx.Report(section, "'" + pattern + "' is " + Found(section) + ", expected a mapping of options");
    } else {
      ctx.Step([&] { parsed = R::Parse(ctx, section, logical); });
    }
  });
  return parsed;
}

// Whether `upper` may sit over `lower` (patterns/pattern.h); reported when not.
void CheckStack(const FileContext& ctx, const YAML::Node& at, const PatternRule& upper,
                const PatternRule& lower) {
  std::visit(
      [&](const auto& up, const auto& down) {
        using U = std::decay_t<decltype(up)>;
        using L = std::decay_t<decltype(down)>;
        const std::string stack = "'" + std::string(U::kName) + "' over '" + std::string(L::kName) + "'";
        if constexpr (!StackUpperRule<U>) {
          ctx.Report(at, "cannot stack " + stack + ": the " + std::string(U::kName) +
                             " rule cannot be the upper rule of a stack (rules that can: " +
                             PatternsThat<CanBeUpper>() + ")");
        } else if constexpr (!StackLowerRule<L>) {
          ctx.Report(at, "cannot stack " + stack + ": the " + std::string(L::kName) +
                             " rule cannot be the lower rule of a stack, it does not answer every "
                             "command as a plain collection would (rules that can: " +
                             PatternsThat<CanBeLower>() + ")");
        } else {
          const std::vector<std::string> reserved = down.ReservedFields();
          for (const std::string& field : up.FieldsWritten())
            if (std::find(reserved.begin(), reserved.end(), field) != reserved.end())
              ctx.Report(at, "cannot stack " + stack + ": the " + std::string(U::kName) + " rule writes '" +
                                 field + "', a name the " + std::string(L::kName) +
                                 " rule's stored form uses for itself; choose another name");
          for (const std::string& field : up.FieldsReadAsStored())
            if (!down.StoresAsWritten(field) &&
                std::find(reserved.begin(), reserved.end(), field) == reserved.end())
              ctx.Report(at, "cannot stack " + stack + ": the " + std::string(U::kName) +
                                 " rule reads '" + field + "' as stored, and the " +
                                 std::string(L::kName) + " rule does not store it as written "
                                 "(make it one of the fields that rule keeps as they are)");
        }
      },
      upper, lower);
}

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
  std::vector<std::string> patterns;
  if (!ctx.Step([&] { patterns = PatternList(ctx, root, pattern_names); })) return std::nullopt;

  Rule rule;
  rule.name = std::filesystem::path(source).stem().string();
  rule.source = source;
  bool all_known = true;
  for (const std::string& pattern : patterns) {
    bool known = false;
    ForEachPatternType([&]<typename R>() { known |= pattern == R::kName; });
    if (!known) ctx.Report(root["pattern"], "unknown pattern '" + pattern + "', expected: " + pattern_names);
    all_known &= known;
  }
  if (!all_known) return std::nullopt;
  std::vector<PatternRule> layers;
  for (const std::string& pattern : patterns) {
    std::optional<PatternRule> layer = ParseSection(ctx, root, pattern, logical);
    if (!layer) continue;
    // A pattern rule that names its rule in its messages (rule_name) gets
    // the file's stem, as Rule::name.
    std::visit([&](auto& p) { if constexpr (requires { p.rule_name; }) p.rule_name = rule.name; }, *layer);
    layers.push_back(std::move(*layer));
  }
  for (const auto& entry : root) {
    std::string key = entry.first.Scalar();
    if (key != "namespace" && key != "pattern" && root_keys.count(key) &&
        std::find(patterns.begin(), patterns.end(), key) == patterns.end())
      ctx.Report(entry.first, "section '" + key + "' does not belong to pattern '" +
                                  (patterns.size() == 1 ? patterns[0] : patterns[0] + "' or '" + patterns[1]) +
                                  "'");
  }
  if (layers.size() != patterns.size() || ctx.HasErrors()) return std::nullopt;
  if (layers.size() == 2) CheckStack(ctx, root["pattern"], layers[0], layers[1]);
  if (ctx.HasErrors()) return std::nullopt;
  rule.pattern = std::move(layers[0]);
  rule.below.assign(std::make_move_iterator(layers.begin() + 1), std::make_move_iterator(layers.end()));
  rule.stacked = !rule.below.empty();
  return rule;
}

void ParseInto(const std::string& text, const std::string& source, std::vector<Rule>& rules,
               std::vector<std::string>& errors) {
  if (std::optional<int> line = FirstLineNotUtf8(text)) {
    errors.push_back(source + ":" + std::to_string(*line) +
                     ": the text is not UTF-8, expected a YAML file in UTF-8");
    return;
  }
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
    for (const WrittenNamespace& w : rule.Writes()) {
      auto it = owner.find(w.ns.full());
      if (it != owner.end()) errors.push_back(rule.source + ":1: " + w.conflict(it->second));
    }
  }
  // A collection that a rule shares by value of a field (the types of a
  // polymorphic collection) is written only by rules sharing it by that
  // field, each with its own value. (Other rules may write fields of one
  // collection together: FieldsWrittenElsewhere checks those.)
  struct Sharer {
    std::string source;
    std::optional<WrittenNamespace::Share> share;
  };
  std::map<std::string, std::vector<Sharer>> sharers;
  for (const Rule& rule : rules)
    for (const WrittenNamespace& w : rule.Writes()) sharers[w.ns.full()].push_back({rule.source, w.share});
  // A collection a rule owns whole (an outlier rule's overflow
  // collection, a history rule's history collection) is written by no
  // other rule.
  for (const auto& [ns, writers] : sharers) {
    std::vector<bool> owns;
    for (const Rule& rule : rules)
      for (const WrittenNamespace& w : rule.Writes())
        if (w.ns.full() == ns) owns.push_back(w.exclusive);
    // (A collection shared by value is checked below: its sharers only.)
    const bool owned = std::find(owns.begin(), owns.end(), true) != owns.end() &&
                       std::none_of(writers.begin(), writers.end(), [](const Sharer& s) { return s.share.has_value(); });
    for (size_t i = 1; owned && i < writers.size(); ++i)
      errors.push_back(writers[i].source + ":1: collection '" + ns + "' is also written by the rule in " +
                       writers.front().source + ", expected a collection one rule writes (the collection where a " +
                       "rule stores part of its documents is its own)");
  }
  for (const auto& [ns, writers] : sharers) {
    const bool shared = std::any_of(writers.begin(), writers.end(), [](const Sharer& s) { return s.share.has_value(); });
    for (size_t i = 1; shared && i < writers.size(); ++i) {
      const Sharer& first = writers.front();
      const Sharer& other = writers[i];
      if (!first.share || !other.share)
        errors.push_back(other.source + ":1: collection '" + ns + "' is also written by the rule in " + first.source +
                         ", which stores other documents there; expected only rules that share it by one field, one value each");
      else if (first.share->field != other.share->field)
        errors.push_back(other.source + ":1: collection '" + ns + "' is shared by field '" + other.share->field +
                         "' here and by field '" + first.share->field + "' in " + first.source +
                         ", expected every rule storing into it to name the same field");
      else
        for (size_t j = 0; j < i; ++j)
          if (writers[j].share && writers[j].share->value == other.share->value)
            errors.push_back(other.source + ":1: value '" + other.share->value + "' of '" + other.share->field +
                             "' in collection '" + ns + "' is also the rule's in " + writers[j].source +
                             ", expected a distinct value per rule");
    }
  }
  for (Rule& rule : rules)
    for (const WrittenNamespace& w : rule.Writes()) {
      if (!w.share) continue;
      Rule::SharedCollection shared{w.ns, {}};
      for (const Sharer& sharer : sharers[w.ns.full()])
        if (sharer.share) shared.shares.push_back(*sharer.share);
      rule.shared.push_back(std::move(shared));
    }
  // A field of another collection is written by one rule.
  std::map<std::string, std::string> writer;
  for (const Rule& rule : rules) {
    for (const auto& [ns, field] : rule.FieldsWrittenElsewhere()) {
      auto [it, fresh] = writer.emplace(ns.full() + "." + field, rule.source);
      if (!fresh && it->second != rule.source)
        errors.push_back(rule.source + ":1: field '" + field + "' of " + ns.full() + " is also written by the rule in " +
                         it->second + ", expected one rule writing a field");
    }
  }
  // A collection whose writes a rule follows has no rule of its own (that
  // is Writes' check) and one watcher.
  std::map<std::string, std::string> watcher;
  for (const Rule& rule : rules) {
    for (const Namespace& ns : rule.Watches()) {
      auto [it, fresh] = watcher.emplace(ns.full(), rule.source);
      if (!fresh)
        errors.push_back(rule.source + ":1: the writes of '" + ns.full() + "' are already followed by the rule in " +
                         it->second + ", expected one rule following a collection's writes");
    }
  }
  RuleLoadResult result;
  result.errors = std::move(errors);
  if (result.errors.empty()) result.rules = std::make_shared<const RuleSet>(std::move(rules));
  return result;
}

}  // namespace

RuleLoadResult LoadRuleText(const std::string& text, const std::string& source) {
  return LoadRuleTexts({{source, text}});
}

RuleLoadResult LoadRuleTexts(const std::vector<RuleFileText>& files) {
  std::vector<Rule> rules;
  std::vector<std::string> errors;
  for (const RuleFileText& file : files) ParseInto(file.text, file.source, rules, errors);
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
