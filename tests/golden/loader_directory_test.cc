// The rule loader's handling of a rules directory (ruleset/loader.h,
// LoadRuleDirectory): what it reads, what it skips, what it reports when the
// directory itself is wrong. The per-file cases are data, under loader/.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "ruleset/loader.h"
#include "tests/golden/temp_dir.h"

namespace remold {
namespace {

namespace fs = std::filesystem;

const char* kRule =
    "namespace: a.b\npattern: bucket\nbucket:\n  collection: c\n  time: t\n  span: 1h\n";

TEST(RuleLoader, NonDirectory) {
  TempDir dir;
  std::string file = dir.Write("file.yaml", kRule);
  RuleLoadResult result = LoadRuleDirectory(file);
  EXPECT_EQ(result.rules, nullptr);
  ASSERT_EQ(result.errors.size(), 1u);
  EXPECT_EQ(result.errors[0], file + ": not a directory, expected the rules directory");

  RuleLoadResult missing = LoadRuleDirectory((dir.path() / "nope").string());
  EXPECT_EQ(missing.rules, nullptr);
  ASSERT_EQ(missing.errors.size(), 1u);
  EXPECT_EQ(missing.errors[0],
            (dir.path() / "nope").string() + ": not a directory, expected the rules directory");
}

TEST(RuleLoader, EmptyDirectoryIsAnEmptyRuleSet) {
  TempDir dir;
  RuleLoadResult result = LoadRuleDirectory(dir.path().string());
  ASSERT_TRUE(result.errors.empty());
  ASSERT_TRUE(result.rules);
  EXPECT_TRUE(result.rules->empty());
}

TEST(RuleLoader, ValidDirectoryWithEveryOption) {
  TempDir dir;
  std::string source = dir.Write("readings.yaml", R"(namespace: iot.readings
pattern: bucket
bucket:
  collection: readings_buckets
  meta: [site, sensor]
  time: at
  span: 15m
  bucket_time: t0
  measurements: readings
  fields: [_id, at, temp, humidity]
  summaries:
    temp: [sum, min, max]
    humidity: [max]
  max_count: 120
)");
  dir.Write("minutes.yml", R"(namespace: iot.minutes
pattern: bucket
bucket:
  collection: minutes_buckets
  time: ts
  granularity: minute
)");
  dir.Write("days.yaml", "namespace: logs.days\npattern: bucket\nbucket:\n"
                         "  collection: days_b\n  time: ts\n  granularity: day\n");
  // Ignored: hidden files, other extensions, directories.
  dir.Write(".hidden.yaml", "not: a rule");
  dir.Write("notes.txt", "not a rule");
  fs::create_directory(dir.path() / "sub.yaml");

  RuleLoadResult result = LoadRuleDirectory(dir.path().string());
  ASSERT_TRUE(result.errors.empty()) << result.errors.front();
  ASSERT_TRUE(result.rules);
  ASSERT_EQ(result.rules->rules().size(), 3u);

  const Rule* rule = result.rules->Find("iot", "readings");
  ASSERT_TRUE(rule);
  EXPECT_EQ(rule->name, "readings");
  EXPECT_EQ(rule->source, source);
  const auto& b = std::get<BucketRule>(rule->pattern);
  EXPECT_EQ(b.logical, (Namespace{"iot", "readings"}));
  EXPECT_EQ(b.buckets, (Namespace{"iot", "readings_buckets"}));
  EXPECT_EQ(b.meta_fields, (std::vector<std::string>{"site", "sensor"}));
  EXPECT_EQ(b.time_field, "at");
  EXPECT_EQ(b.span_ms, 15 * 60'000);
  EXPECT_EQ(b.bucket_time_field, "t0");
  EXPECT_EQ(b.measurements_field, "readings");
  EXPECT_EQ(b.measurement_fields, (std::vector<std::string>{"_id", "at", "temp", "humidity"}));
  ASSERT_EQ(b.summaries.size(), 2u);
  EXPECT_EQ(b.summaries[0].field, "temp");
  EXPECT_TRUE(b.summaries[0].sum && b.summaries[0].min && b.summaries[0].max);
  EXPECT_EQ(b.summaries[1].field, "humidity");
  EXPECT_TRUE(!b.summaries[1].sum && !b.summaries[1].min && b.summaries[1].max);
  ASSERT_TRUE(b.max_count.has_value());
  EXPECT_EQ(*b.max_count, 120);

  const Rule* minutes = result.rules->Find("iot", "minutes");
  ASSERT_TRUE(minutes);
  const auto& m = std::get<BucketRule>(minutes->pattern);
  EXPECT_EQ(m.span_ms, 60'000);
  EXPECT_TRUE(m.meta_fields.empty());
  EXPECT_EQ(m.bucket_time_field, "start");
  EXPECT_EQ(m.measurements_field, "m");
  EXPECT_FALSE(m.max_count.has_value());
  EXPECT_EQ(m.buckets, (Namespace{"iot", "minutes_buckets"}));

  const Rule* days = result.rules->Find("logs", "days");
  ASSERT_TRUE(days);
  EXPECT_EQ(std::get<BucketRule>(days->pattern).span_ms, 86'400'000);

  EXPECT_EQ(result.rules->Find("iot", "readings_buckets"), nullptr);
  EXPECT_EQ(result.rules->Find("iot", "other"), nullptr);
}

}  // namespace
}  // namespace remold
