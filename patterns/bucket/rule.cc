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

// Bucket-level names must not collide with each other. A collision is
// reported on the name the file wrote, and names a default as a default.
void CheckBucketNames(const FileContext& ctx, const YAML::Node& b, const BucketRule& rule) {
  std::map<std::string, std::string> owners = {
      {"_id", "the bucket's _id"},
      {BucketRule::kCountField, "the bucket's count of readings"},
      {BucketRule::kSumField, "the bucket's sum summaries"},
      {BucketRule::kMinField, "the bucket's min summaries"},
      {BucketRule::kMaxField, "the bucket's max summaries"},
      {BucketRule::kBytesField, "the bucket's size in bytes"}};
  if (!b["bucket_time"])
    owners.emplace(rule.bucket_time_field, "the bucket's start time, named '" +
                                               rule.bucket_time_field + "' by default");
  if (!b["measurements"])
    owners.emplace(rule.measurements_field, "the bucket's array of readings, named '" +
                                                rule.measurements_field + "' by default");
  auto claim = [&](const YAML::Node& node, const std::string& name, const std::string& what) {
    auto [it, fresh] = owners.emplace(name, what + " '" + name + "'");
    if (!fresh)
      ctx.Report(node, what + " '" + name + "' collides in the bucket documents with " +
                           it->second + ", expected another name");
  };
  for (const auto& f : rule.meta_fields) claim(b["meta"], f, "meta field");
  if (b["bucket_time"]) claim(b["bucket_time"], rule.bucket_time_field, "bucket_time");
  if (b["measurements"]) claim(b["measurements"], rule.measurements_field, "measurements");
  if (std::find(rule.meta_fields.begin(), rule.meta_fields.end(), rule.time_field) !=
      rule.meta_fields.end())
    ctx.Report(b["time"], "time field '" + rule.time_field + "' cannot also be a meta field");
}

// One entry of `summaries:`, `field: [sum, min, max]`. `fields_known`: the
// time, meta and measurement fields of `rule` were read without mistakes.
BucketSummary ParseSummary(const FileContext& ctx, const YAML::Node& key, const YAML::Node& kinds,
                           const BucketRule& rule, bool fields_known) {
  BucketSummary summary;
  summary.field = ctx.KeyName(key, "summary field");
  ctx.CheckFieldName(key, summary.field, "summary field");
  if (fields_known) {
    if (summary.field == rule.time_field ||
        std::find(rule.meta_fields.begin(), rule.meta_fields.end(), summary.field) !=
            rule.meta_fields.end())
      ctx.Report(key, "summary field '" + summary.field +
                          "' must be a measurement field, not the time or a meta field");
    else if (!rule.measurement_fields.empty() &&
             std::find(rule.measurement_fields.begin(), rule.measurement_fields.end(),
                       summary.field) == rule.measurement_fields.end())
      ctx.Report(key, "summary field '" + summary.field + "' is not listed in 'fields'");
  }
  if (!kinds.IsSequence() || kinds.size() == 0)
    ctx.Fail(kinds, "summaries of '" + summary.field + "' is " + Found(kinds) +
                        ", expected a non-empty list of sum, min, max");
  for (const auto& kind : kinds) {
    std::string k = TypeOf(kind) == YamlType::kString ? kind.Scalar() : "";
    if (k == "sum") summary.sum = true;
    else if (k == "min") summary.min = true;
    else if (k == "max") summary.max = true;
    else if (k.empty()) ctx.Report(kind, "a summary of '" + summary.field + "' is " + Found(kind) +
                                             ", expected sum, min or max");
    else ctx.Report(kind, "unknown summary '" + k + "', expected sum, min or max");
  }
  return summary;
}

// `summaries: {field: [sum, min, max], ...}`
std::vector<BucketSummary> ParseSummaries(const FileContext& ctx, const YAML::Node& s,
                                          const BucketRule& rule, bool fields_known) {
  std::vector<BucketSummary> summaries;
  if (!s.IsMap())
    ctx.Fail(s, "'summaries' is " + Found(s) + ", expected a mapping of field names to a list of "
                "sum, min, max");
  for (const auto& entry : s) {
    ctx.Step([&] {
      summaries.push_back(ParseSummary(ctx, entry.first, entry.second, rule, fields_known));
    });
  }
  return summaries;
}

int32_t ParseMaxCount(const FileContext& ctx, const YAML::Node& m) {
  int64_t value = 0;
  std::string text = TypeOf(m) == YamlType::kInt ? m.Scalar() : "";
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 1 || value > 100'000)
    ctx.Fail(m, "max_count is " + Found(m) + ", expected an integer from 1 to 100000");
  return static_cast<int32_t>(value);
}

int32_t ParseMaxBytes(const FileContext& ctx, const YAML::Node& m) {
  int64_t value = 0;
  std::string text = TypeOf(m) == YamlType::kInt ? m.Scalar() : "";
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 1024 ||
      value > BucketRule::kMaxMaxBytes)
    ctx.Fail(m, "max_bytes is " + Found(m) + ", expected an integer from 1024 to " +
                    std::to_string(BucketRule::kMaxMaxBytes));
  return static_cast<int32_t>(value);
}

}  // namespace

// Each key is read in a Step of its own, so every mistake is reported; a
// check that combines keys runs only when those keys were read.
BucketRule BucketRule::Parse(const FileContext& ctx, const YAML::Node& b, const Namespace& logical) {
  ctx.CheckKeys(b, "'bucket'",
                {"collection", "meta", "time", "span", "granularity", "bucket_time",
                 "measurements", "fields", "extra_fields", "summaries", "max_count",
                 "max_bytes", "migrating"});

  BucketRule rule;
  rule.logical = logical;
  ctx.Step([&] {
    std::string collection = ctx.String(b, "collection", "'bucket'", "a collection name");
    if (collection.empty() || collection.find('$') != std::string::npos ||
        collection == logical.collection)
      ctx.Fail(b["collection"], "bucket collection '" + collection +
                                    "' must be a collection name other than the logical one");
    rule.buckets = {logical.db, collection};
  });

  bool meta_ok = ctx.Step([&] {
    rule.meta_fields = ctx.StringList(b, "meta");
    for (const auto& f : rule.meta_fields) ctx.CheckFieldName(b["meta"], f, "meta field");
  });
  bool time_ok = ctx.Step([&] {
    rule.time_field = ctx.String(b, "time", "'bucket'", "the name of the readings' time field");
    ctx.CheckFieldName(b["time"], rule.time_field, "time field");
  });

  ctx.Step([&] {
    const std::string duration = "a duration like 90s, 15m, 1h or 1d";
    if (b["span"] && b["granularity"])
      ctx.Fail(b["granularity"], "give either 'span' or 'granularity', not both");
    if (b["span"]) rule.span_ms = ParseSpan(ctx, b["span"], ctx.String(b, "span", "'bucket'", duration));
    else if (b["granularity"])
      rule.span_ms = ParseGranularity(
          ctx, b["granularity"],
          ctx.String(b, "granularity", "'bucket'", "one of: second, minute, hour, day"));
    else ctx.Fail(b, "missing 'span' or 'granularity' in 'bucket', expected e.g. span: 1h");
  });

  bool names_ok = ctx.Step([&] {
    rule.bucket_time_field = ctx.OptionalString(b, "bucket_time", "start", "a field name");
    if (b["bucket_time"]) ctx.CheckFieldName(b["bucket_time"], rule.bucket_time_field, "bucket_time");
  });
  names_ok &= ctx.Step([&] {
    rule.measurements_field = ctx.OptionalString(b, "measurements", "m", "a field name");
    if (b["measurements"])
      ctx.CheckFieldName(b["measurements"], rule.measurements_field, "measurements");
  });

  bool fields_ok = ctx.Step([&] {
    rule.measurement_fields = ctx.StringList(b, "fields");
    for (const auto& f : rule.measurement_fields) ctx.CheckFieldName(b["fields"], f, "field");
  });
  if (time_ok && fields_ok && !rule.measurement_fields.empty() &&
      std::find(rule.measurement_fields.begin(), rule.measurement_fields.end(), rule.time_field) ==
          rule.measurement_fields.end())
    ctx.Report(b["fields"], "'fields' must include the time field '" + rule.time_field + "'");

  if (YAML::Node e = b["extra_fields"]) {
    ctx.Step([&] {
      std::string extra = ctx.String(b, "extra_fields", "'bucket'", "error or drop");
      if (extra != "error" && extra != "drop")
        ctx.Fail(e, "extra_fields '" + extra + "' must be error or drop");
      if (fields_ok && rule.measurement_fields.empty())
        ctx.Fail(e, "extra_fields applies only with 'fields'");
      rule.drop_extra_fields = extra == "drop";
    });
  }

  if (meta_ok && time_ok && names_ok) CheckBucketNames(ctx, b, rule);
  if (YAML::Node s = b["summaries"]) {
    bool fields_known = meta_ok && time_ok && fields_ok;
    ctx.Step([&] { rule.summaries = ParseSummaries(ctx, s, rule, fields_known); });
  }
  if (YAML::Node m = b["max_count"]) ctx.Step([&] { rule.max_count = ParseMaxCount(ctx, m); });
  if (YAML::Node m = b["max_bytes"]) ctx.Step([&] { rule.max_bytes = ParseMaxBytes(ctx, m); });
  if (YAML::Node m = b["migrating"]) {
    // Only `false`: readings move between the collections with `remold
    // migrate`, and reads cannot cover both while they move.
    ctx.Step([&] {
      if (ParseBool(ctx, b, "migrating", false))
        ctx.Fail(m, "'migrating' is true, expected false (the operator's word that " + logical.full() +
                        " holds no reading written before the rule); readings written before it are moved "
                        "with `remold migrate`, and reads are refused until none is left");
      rule.adoption = Adoption::kOff;
    });
  }
  return rule;
}

std::vector<WrittenNamespace> BucketRule::Writes() const {
  return {{buckets, [buckets = buckets](std::string_view) {
             return "bucket collection '" + buckets.full() +
                    "' is itself the logical namespace of a rule, expected a plain collection";
           }}};
}

std::string BucketRule::Describe() const { return logical.full() + " -> " + buckets.full(); }

std::string BucketRule::OnRemoval() const {
  return "the readings stay in the bucket collection " + buckets.full() + ", and reads of " +
         logical.full() + " no longer return them until the rule is back (or the readings are "
         "moved back to " + logical.full() + ": `remold migrate --to flat`)";
}

std::string BucketRule::OnAddition() const {
  if (adoption == Adoption::kOff)
    return "documents already in " + logical.full() + " are not converted (`migrating: false`): reads of " +
           logical.full() + " return the readings of " + buckets.full() +
           " only, and those documents stay where they are, unread, until they are migrated";
  return "documents already in " + logical.full() + " are not converted: while any is left (remold counts "
         "them), reads of " + logical.full() + " are refused until `remold migrate` has moved them into " +
         buckets.full();
}

std::string BucketRule::Unconverted() const {
  // Readings live in the bucket collection: anything in the logical one
  // was written there before the rule.
  return "{}";
}

std::vector<NamespaceForms> BucketRule::Forms() const {
  std::string form = "bucket " + buckets.full() + " meta [";
  for (size_t i = 0; i < meta_fields.size(); ++i) form += (i ? ", " : "") + meta_fields[i];
  form += "] time " + time_field + " span " + std::to_string(span_ms) + "ms start " + bucket_time_field +
          " measurements " + measurements_field;
  NamespaceForms forms{logical, form, {form}};
  // While readings written before the rule remain, reads are refused: never wrong.
  if (flat_readings_left) forms.reads.emplace_back(kPlainForm);
  return {forms};
}

}  // namespace remold
