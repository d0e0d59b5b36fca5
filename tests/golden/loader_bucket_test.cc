// The bucket rules the loader accepts (ruleset/loader.h), checked field by
// field through BucketRule (ruleset/rule.h). The refused ones are data, under
// loader/bucket/.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <variant>

#include "ruleset/loader.h"
#include "tests/golden/temp_dir.h"

namespace remold {
namespace {

// The valid rule of the brief.
const char* kValid = R"(namespace: iot.readings
pattern: bucket
bucket:
  collection: readings_buckets
  meta: [sensor]
  time: at
  span: 1h
  summaries:
    temp: [sum, min, max]
)";

TEST(RuleLoader, ValidFileLoads) {
  TempDir dir;
  dir.Write("readings.yaml", kValid);
  RuleLoadResult result = LoadRuleDirectory(dir.path().string());
  ASSERT_TRUE(result.errors.empty()) << result.errors.front();
  ASSERT_TRUE(result.rules);
  ASSERT_EQ(result.rules->rules().size(), 1u);
  const auto& bucket = std::get<BucketRule>(result.rules->rules()[0].pattern);
  EXPECT_EQ(bucket.span_ms, 3'600'000);
  EXPECT_EQ(bucket.bucket_time_field, "start");  // defaults
  EXPECT_EQ(bucket.measurements_field, "m");
  EXPECT_TRUE(bucket.measurement_fields.empty());
  EXPECT_FALSE(bucket.max_count.has_value());
}

TEST(RuleLoader, MaxCountBoundsAccepted) {
  for (const char* value : {"1", "100000"}) {
    SCOPED_TRACE(value);
    RuleLoadResult result = LoadRuleText(
        std::string("namespace: iot.readings\npattern: bucket\nbucket:\n  collection: b\n"
                    "  time: at\n  span: 1h\n  max_count: ") + value + "\n",
        "r.yaml");
    ASSERT_TRUE(result.errors.empty()) << result.errors.front();
    EXPECT_EQ(*std::get<BucketRule>(result.rules->rules()[0].pattern).max_count, std::stoi(value));
  }
}

TEST(RuleLoader, SpanUnits) {
  struct Case {
    const char* text;
    int64_t ms;
  };
  for (const Case& c : {Case{"90s", 90'000}, Case{"15m", 900'000}, Case{"2h", 7'200'000},
                        Case{"1d", 86'400'000}}) {
    SCOPED_TRACE(c.text);
    RuleLoadResult result = LoadRuleText(
        std::string("namespace: a.b\npattern: bucket\nbucket:\n  collection: c\n  time: t\n"
                    "  span: ") + c.text + "\n",
        "r.yaml");
    ASSERT_TRUE(result.errors.empty()) << result.errors.front();
    EXPECT_EQ(std::get<BucketRule>(result.rules->rules()[0].pattern).span_ms, c.ms);
  }
}

TEST(RuleLoader, GranularityUnits) {
  struct Case {
    const char* text;
    int64_t ms;
  };
  for (const Case& c : {Case{"second", 1'000}, Case{"minute", 60'000}, Case{"hour", 3'600'000},
                        Case{"day", 86'400'000}}) {
    SCOPED_TRACE(c.text);
    RuleLoadResult result = LoadRuleText(
        std::string("namespace: a.b\npattern: bucket\nbucket:\n  collection: c\n  time: t\n"
                    "  granularity: ") + c.text + "\n",
        "r.yaml");
    ASSERT_TRUE(result.errors.empty()) << result.errors.front();
    EXPECT_EQ(std::get<BucketRule>(result.rules->rules()[0].pattern).span_ms, c.ms);
  }
}

}  // namespace
}  // namespace remold
