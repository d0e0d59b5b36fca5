#include "rules/loader.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "rules/computed_loader.h"
#include "rules/file_context.h"
#include "rules/rule.h"

namespace remold {
namespace {

// "90s", "15m", "1h", "1d" -> milliseconds.
int64_t ParseSpan(const FileContext& ctx, const YAML::Node& node, const std::string& text) {
  int64_t amount = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), amount);
  std::string unit(end, text.data() + text.size());
  static const std::map<std::string, int64_t> kUnits = {
      {"s", 1'000}, {"m", 60'000}, {"h", 3'600'000}, {"d", 86'400'000}};
  auto it = kUnits.find(unit);
  if (ec != std::errc() || amount <= 0 || it == kUnits.end())
    ctx.Fail(node, "span '" + text + "' must be a positive duration like 90s, 15m, 1h or 1d");
  constexpr int64_t kMaxSpanMs = 366LL * 86'400'000;  // a year of measurements per bucket at most
  if (amount > kMaxSpanMs / it->second)
    ctx.Fail(node, "span '" + text + "' is too long, expected at most 366d");
  return amount * it->second;
}

int64_t ParseGranularity(const FileContext& ctx, const YAML::Node& node, const std::string& text) {
  if (text == "second") return 1'000;
  if (text == "minute") return 60'000;
  if (text == "hour") return 3'600'000;
  if (text == "day") return 86'400'000;
  ctx.Fail(node, "granularity '" + text + "' must be one of: second, minute, hour, day");
}

BucketRule ParseBucket(const FileContext& ctx, const YAML::Node& root, const Namespace& logical) {
  YAML::Node b = root["bucket"];
  if (!b) ctx.Fail(root, "missing 'bucket' section, expected the bucket rule's options");
  if (!b.IsMap()) ctx.Fail(b, "'bucket' must be a mapping of options");
  ctx.CheckKeys(b, "'bucket'",
                {"collection", "meta", "time", "span", "granularity", "bucket_time",
                 "measurements", "fields", "summaries", "max_count"});

  BucketRule rule;
  rule.logical = logical;
  std::string collection = ctx.String(b, "collection", "'bucket'");
  if (collection.empty() || collection.find('$') != std::string::npos ||
      collection == logical.collection)
    ctx.Fail(b["collection"], "bucket collection '" + collection +
                                  "' must be a collection name other than the logical one");
  rule.buckets = {logical.db, collection};

  rule.meta_fields = ctx.StringList(b, "meta");
  for (const auto& f : rule.meta_fields) ctx.CheckFieldName(b["meta"], f, "meta field");
  rule.time_field = ctx.String(b, "time", "'bucket'");
  ctx.CheckFieldName(b["time"], rule.time_field, "time field");

  if (b["span"] && b["granularity"])
    ctx.Fail(b["granularity"], "give either 'span' or 'granularity', not both");
  if (b["span"]) rule.span_ms = ParseSpan(ctx, b["span"], ctx.String(b, "span", "'bucket'"));
  else if (b["granularity"])
    rule.span_ms = ParseGranularity(ctx, b["granularity"], ctx.String(b, "granularity", "'bucket'"));
  else ctx.Fail(b, "missing 'span' or 'granularity' in 'bucket', expected e.g. span: 1h");

  rule.bucket_time_field = ctx.OptionalString(b, "bucket_time", "start");
  ctx.CheckFieldName(b["bucket_time"] ? b["bucket_time"] : b, rule.bucket_time_field, "bucket_time");
  rule.measurements_field = ctx.OptionalString(b, "measurements", "m");
  ctx.CheckFieldName(b["measurements"] ? b["measurements"] : b, rule.measurements_field,
                     "measurements");

  rule.measurement_fields = ctx.StringList(b, "fields");
  for (const auto& f : rule.measurement_fields) ctx.CheckFieldName(b["fields"], f, "field");
  if (!rule.measurement_fields.empty() &&
      std::find(rule.measurement_fields.begin(), rule.measurement_fields.end(), rule.time_field) ==
          rule.measurement_fields.end())
    ctx.Fail(b["fields"], "'fields' must include the time field '" + rule.time_field + "'");

  // Bucket-level names must not collide with each other.
  std::set<std::string> bucket_names = {"_id", BucketRule::kCountField, BucketRule::kSumField,
                                        BucketRule::kMinField, BucketRule::kMaxField};
  auto claim = [&](const YAML::Node& node, const std::string& name, const std::string& what) {
    if (!bucket_names.insert(name).second)
      ctx.Fail(node, what + " '" + name + "' collides with another bucket field (reserved: _id, "
                     "count, sum, min, max, the meta fields, bucket_time and measurements)");
  };
  for (const auto& f : rule.meta_fields) claim(b["meta"], f, "meta field");
  claim(b["bucket_time"] ? b["bucket_time"] : b, rule.bucket_time_field, "bucket_time");
  claim(b["measurements"] ? b["measurements"] : b, rule.measurements_field, "measurements");
  if (std::find(rule.meta_fields.begin(), rule.meta_fields.end(), rule.time_field) !=
      rule.meta_fields.end())
    ctx.Fail(b["time"], "time field '" + rule.time_field + "' cannot also be a meta field");

  if (YAML::Node s = b["summaries"]) {
    if (!s.IsMap()) ctx.Fail(s, "'summaries' must map field names to a list of sum, min, max");
    for (const auto& entry : s) {
      BucketSummary summary;
      summary.field = entry.first.as<std::string>();
      ctx.CheckFieldName(entry.first, summary.field, "summary field");
      if (summary.field == rule.time_field ||
          std::find(rule.meta_fields.begin(), rule.meta_fields.end(), summary.field) !=
              rule.meta_fields.end())
        ctx.Fail(entry.first, "summary field '" + summary.field +
                                  "' must be a measurement field, not the time or a meta field");
      if (!rule.measurement_fields.empty() &&
          std::find(rule.measurement_fields.begin(), rule.measurement_fields.end(),
                    summary.field) == rule.measurement_fields.end())
        ctx.Fail(entry.first, "summary field '" + summary.field + "' is not listed in 'fields'");
      if (!entry.second.IsSequence() || entry.second.size() == 0)
        ctx.Fail(entry.second, "summaries of '" + summary.field +
                                   "' must be a non-empty list of sum, min, max");
      for (const auto& kind : entry.second) {
        std::string k = kind.IsScalar() ? kind.as<std::string>() : "";
        if (k == "sum") summary.sum = true;
        else if (k == "min") summary.min = true;
        else if (k == "max") summary.max = true;
        else ctx.Fail(kind, "unknown summary '" + k + "', expected sum, min or max");
      }
      rule.summaries.push_back(summary);
    }
  }

  if (YAML::Node m = b["max_count"]) {
    int64_t value = 0;
    std::string text = m.IsScalar() ? m.as<std::string>() : "";
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size() || value < 1 || value > 100'000)
      ctx.Fail(m, "max_count must be an integer from 1 to 100000");
    rule.max_count = static_cast<int32_t>(value);
  }
  return rule;
}

AttributeRule ParseAttribute(const FileContext& ctx, const YAML::Node& root,
                             const Namespace& logical) {
  YAML::Node a = root["attribute"];
  if (!a) ctx.Fail(root, "missing 'attribute' section, expected the attribute rule's options");
  if (!a.IsMap()) ctx.Fail(a, "'attribute' must be a mapping of options");
  ctx.CheckKeys(a, "'attribute'",
                {"array", "key", "value", "fields", "except", "unfold", "fix_elem_match"});
  AttributeRule rule;
  rule.logical = logical;
  rule.array_field = ctx.OptionalString(a, "array", "specs");
  ctx.CheckFieldName(a["array"] ? a["array"] : a, rule.array_field, "array");
  rule.key_name = ctx.OptionalString(a, "key", "k");
  ctx.CheckFieldName(a["key"] ? a["key"] : a, rule.key_name, "key");
  rule.value_name = ctx.OptionalString(a, "value", "v");
  ctx.CheckFieldName(a["value"] ? a["value"] : a, rule.value_name, "value");
  if (rule.key_name == rule.value_name)
    ctx.Fail(a["value"] ? a["value"] : a, "'key' and 'value' must be different names");
  rule.fields = ctx.StringList(a, "fields");
  rule.except = ctx.StringList(a, "except");
  if (bool(a["fields"]) == bool(a["except"]))
    ctx.Fail(a, "give either 'fields' (the attributes) or 'except' (the fixed fields), not both "
                "and not neither");
  if (a["fields"] && rule.fields.empty())
    ctx.Fail(a["fields"], "'fields' must list at least one attribute");
  for (const auto& f : rule.fields) {
    ctx.CheckFieldName(a["fields"], f, "attribute field");
    if (f == "_id" || f == rule.array_field)
      ctx.Fail(a["fields"], "'" + f + "' cannot be an attribute");
  }
  for (const auto& f : rule.except) ctx.CheckFieldName(a["except"], f, "fixed field");
  rule.unfold = ParseBool(ctx, a, "unfold", true);
  rule.fix_elem_match = ParseBool(ctx, a, "fix_elem_match", true);
  return rule;
}

Rule ParseRule(const YAML::Node& root, const std::string& source) {
  FileContext ctx(source);
  if (!root.IsMap()) ctx.Fail(root, "a rule file must be a mapping with 'namespace' and 'pattern'");
  ctx.CheckKeys(root, "the rule", {"namespace", "pattern", "bucket", "attribute", "computed"});
  std::string ns_text = ctx.String(root, "namespace", "the rule");
  Namespace logical = ParseNamespace(ctx, root["namespace"], ns_text);
  std::string pattern = ctx.String(root, "pattern", "the rule");

  Rule rule;
  rule.name = std::filesystem::path(source).stem().string();
  rule.source = source;
  if (pattern == "bucket") {
    rule.pattern = ParseBucket(ctx, root, logical);
  } else if (pattern == "attribute") {
    rule.pattern = ParseAttribute(ctx, root, logical);
  } else if (pattern == "computed") {
    rule.pattern = ParseComputed(ctx, root, logical);
  } else {
    ctx.Fail(root["pattern"], "unknown pattern '" + pattern + "', expected: bucket, attribute, computed");
  }
  for (const auto& entry : root) {
    std::string key = entry.first.as<std::string>();
    if (key != "namespace" && key != "pattern" && key != pattern)
      ctx.Fail(entry.first, "section '" + key + "' does not belong to pattern '" + pattern + "'");
  }
  return rule;
}

void ParseInto(const std::string& text, const std::string& source, std::vector<Rule>& rules,
               std::vector<std::string>& errors) {
  try {
    YAML::Node root = YAML::Load(text);
    rules.push_back(ParseRule(root, source));
  } catch (const RuleError& e) {
    errors.push_back(e.message);
  } catch (const YAML::Exception& e) {
    errors.push_back(source + ":" + std::to_string(e.mark.line + 1) + ": invalid YAML: " + e.msg);
  }
}

RuleLoadResult Finish(std::vector<Rule> rules, std::vector<std::string> errors) {
  std::map<std::string, std::string> owner;
  std::set<std::string> bucket_targets;
  for (const Rule& rule : rules) {
    std::string ns = rule.logical().full();
    auto [it, fresh] = owner.emplace(ns, rule.source);
    if (!fresh)
      errors.push_back(rule.source + ":1: namespace '" + ns + "' already has a rule in " +
                       it->second + ", expected one rule file per collection");
  }
  for (const Rule& rule : rules) {
    const auto* bucket = std::get_if<BucketRule>(&rule.pattern);
    if (bucket && owner.count(bucket->buckets.full()))
      errors.push_back(rule.source + ":1: bucket collection '" + bucket->buckets.full() +
                       "' is itself the logical namespace of a rule, expected a plain collection");
  }
  for (const Rule& rule : rules) {
    const auto* computed = std::get_if<ComputedRule>(&rule.pattern);
    if (!computed) continue;
    for (const auto& aggregate : computed->aggregates) {
      auto it = owner.find(aggregate.target.full());
      if (it != owner.end())
        errors.push_back(rule.source + ":1: target '" + aggregate.target.full() +
                         "' has a rule of its own in " + it->second +
                         "; remold writes maintained fields to it directly and would bypass "
                         "that rule, expected a plain collection");
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
