#include "patterns/bucket/rule.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <set>
#include <string>

#include "rules/file_context.h"

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

// Bucket-level names must not collide with each other.
void CheckBucketNames(const FileContext& ctx, const YAML::Node& b, const BucketRule& rule) {
  std::set<std::string> bucket_names = {"_id", BucketRule::kCountField, BucketRule::kSumField,
                                        BucketRule::kMinField, BucketRule::kMaxField,
                                        BucketRule::kBytesField};
  auto claim = [&](const YAML::Node& node, const std::string& name, const std::string& what) {
    if (!bucket_names.insert(name).second)
      ctx.Fail(node, what + " '" + name + "' collides with another bucket field (reserved: _id, "
                     "count, sum, min, max, bytes, the meta fields, bucket_time and measurements)");
  };
  for (const auto& f : rule.meta_fields) claim(b["meta"], f, "meta field");
  claim(b["bucket_time"] ? b["bucket_time"] : b, rule.bucket_time_field, "bucket_time");
  claim(b["measurements"] ? b["measurements"] : b, rule.measurements_field, "measurements");
  if (std::find(rule.meta_fields.begin(), rule.meta_fields.end(), rule.time_field) !=
      rule.meta_fields.end())
    ctx.Fail(b["time"], "time field '" + rule.time_field + "' cannot also be a meta field");

}

// `summaries: {field: [sum, min, max], ...}`
std::vector<BucketSummary> ParseSummaries(const FileContext& ctx, const YAML::Node& s,
                                          const BucketRule& rule) {
  std::vector<BucketSummary> summaries;
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
      summaries.push_back(summary);
    }
  return summaries;
}

int32_t ParseMaxCount(const FileContext& ctx, const YAML::Node& m) {
    int64_t value = 0;
    std::string text = m.IsScalar() ? m.as<std::string>() : "";
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size() || value < 1 || value > 100'000)
      ctx.Fail(m, "max_count must be an integer from 1 to 100000");
    return static_cast<int32_t>(value);
}

int32_t ParseMaxBytes(const FileContext& ctx, const YAML::Node& m) {
  int64_t value = 0;
  std::string text = m.IsScalar() ? m.as<std::string>() : "";
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 1024 ||
      value > BucketRule::kMaxMaxBytes)
    ctx.Fail(m, "max_bytes must be an integer from 1024 to " +
                    std::to_string(BucketRule::kMaxMaxBytes));
  return static_cast<int32_t>(value);
}

}  // namespace

BucketRule BucketRule::Parse(const FileContext& ctx, const YAML::Node& b, const Namespace& logical) {
  ctx.CheckKeys(b, "'bucket'",
                {"collection", "meta", "time", "span", "granularity", "bucket_time",
                 "measurements", "fields", "extra_fields", "summaries", "max_count",
                 "max_bytes"});

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

  if (b["extra_fields"]) {
    std::string extra = ctx.String(b, "extra_fields", "'bucket'");
    if (extra != "error" && extra != "drop")
      ctx.Fail(b["extra_fields"], "extra_fields '" + extra + "' must be error or drop");
    if (rule.measurement_fields.empty())
      ctx.Fail(b["extra_fields"], "extra_fields applies only with 'fields'");
    rule.drop_extra_fields = extra == "drop";
  }

  CheckBucketNames(ctx, b, rule);
  if (YAML::Node s = b["summaries"]) rule.summaries = ParseSummaries(ctx, s, rule);
  if (YAML::Node m = b["max_count"]) rule.max_count = ParseMaxCount(ctx, m);
  if (YAML::Node m = b["max_bytes"]) rule.max_bytes = ParseMaxBytes(ctx, m);
  return rule;
}

std::vector<WrittenNamespace> BucketRule::Writes() const {
  return {{buckets, [buckets = buckets](std::string_view) {
             return "bucket collection '" + buckets.full() +
                    "' is itself the logical namespace of a rule, expected a plain collection";
           }}};
}

std::string BucketRule::Describe() const { return logical.full() + " -> " + buckets.full(); }

}  // namespace remold
