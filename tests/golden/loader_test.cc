// Unit tests of the rule loader (rules/loader.h): every mistake is one
// `FILE:LINE: what is wrong, what was expected` line, and a directory with
// any mistake yields no RuleSet.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "rules/loader.h"

namespace remold {
namespace {

namespace fs = std::filesystem;

// A fresh directory under the temp dir, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "remold-loader-XXXXXX").string();
    char* made = mkdtemp(pattern.data());
    if (made) path_ = made;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  std::string Write(const std::string& name, const std::string& text) const {
    fs::path file = path_ / name;
    std::ofstream(file) << text;
    return file.string();
  }

 private:
  fs::path path_;
};

// The valid rule of the brief; tests break one thing at a time.
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

// Loads one file as the only rule of a directory: exactly one error expected.
std::string OneError(const std::string& text) {
  TempDir dir;
  std::string file = dir.Write("readings.yaml", text);
  RuleLoadResult result = LoadRuleDirectory(dir.path().string());
  EXPECT_EQ(result.rules, nullptr) << "a file with a mistake must yield no RuleSet";
  EXPECT_EQ(result.errors.size(), 1u);
  if (result.errors.empty()) return "";
  // Report the message without the temp path, which changes every run.
  const std::string& e = result.errors.front();
  EXPECT_EQ(e.rfind(file + ":", 0), 0u) << "the message must start with the file: " << e;
  return e.substr(e.rfind(file + ":", 0) == 0 ? file.size() : 0);
}

// ":LINE: " prefix check plus "contains" checks.
void ExpectMessage(const std::string& message, int line, std::initializer_list<std::string> parts) {
  EXPECT_EQ(message.rfind(":" + std::to_string(line) + ": ", 0), 0u)
      << "expected line " << line << " in: " << message;
  for (const auto& part : parts)
    EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
}

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

TEST(RuleLoader, UnknownKeyNamesKeyAndLine) {
  std::string text = kValid;
  text += "  max_cnt: 10\n";  // line 10
  ExpectMessage(OneError(text), 10, {"unknown key 'max_cnt'", "'bucket'", "expected one of:",
                                     "max_count"});
}

TEST(RuleLoader, UnknownTopLevelKey) {
  ExpectMessage(OneError(std::string("namspace: iot.readings\n") + kValid), 1,
                {"unknown key 'namspace'", "expected one of:", "namespace"});
}

TEST(RuleLoader, MissingNamespace) {
  ExpectMessage(OneError("pattern: bucket\nbucket:\n  collection: b\n  time: at\n  span: 1h\n"), 1,
                {"missing 'namespace'"});
}

TEST(RuleLoader, BadNamespace) {
  for (const char* ns : {"readings", ".readings", "iot.", "iot.read$ings"}) {
    SCOPED_TRACE(ns);
    ExpectMessage(OneError(std::string("namespace: ") + ns +
                           "\npattern: bucket\nbucket:\n  collection: b\n  time: at\n  span: 1h\n"),
                  1, {"namespace '" + std::string(ns) + "'", "'database.collection'"});
  }
}

TEST(RuleLoader, UnknownPattern) {
  ExpectMessage(OneError("namespace: iot.readings\npattern: bukket\n"), 2,
                {"unknown pattern 'bukket'", "expected: bucket"});
}

TEST(RuleLoader, MissingBucketSection) {
  ExpectMessage(OneError("namespace: iot.readings\npattern: bucket\n"), 1,
                {"missing 'bucket' section"});
}

TEST(RuleLoader, BucketSectionNotAMapping) {
  ExpectMessage(OneError("namespace: iot.readings\npattern: bucket\nbucket: [a]\n"), 3,
                {"'bucket' must be a mapping"});
}

TEST(RuleLoader, MissingTimeField) {
  ExpectMessage(OneError("namespace: iot.readings\npattern: bucket\nbucket:\n  collection: b\n"
                         "  span: 1h\n"),
                4, {"missing 'time'"});
}

TEST(RuleLoader, MissingSpanAndGranularity) {
  ExpectMessage(OneError("namespace: iot.readings\npattern: bucket\nbucket:\n  collection: b\n"
                         "  time: at\n"),
                4, {"missing 'span' or 'granularity'"});
}

TEST(RuleLoader, BadSpan) {
  for (const char* span : {"1w", "0h", "-1h", "h", "1.5h", "90"}) {
    SCOPED_TRACE(span);
    ExpectMessage(OneError(std::string("namespace: iot.readings\npattern: bucket\nbucket:\n"
                                       "  collection: b\n  time: at\n  span: ") +
                           span + "\n"),
                  6, {"span '" + std::string(span) + "'", "positive duration"});
  }
}

// A span whose milliseconds overflow int64 must be refused: 2^54 days is
// 2^64 * 84375 ms, which wraps to a span of 0 (a division by zero in every
// bucket start computed afterwards); others wrap to negative spans.
TEST(RuleLoader, SpanOverflowRefused) {
  for (const char* span : {"18014398509481984d", "2305843009213693952s", "9223372036854775807m"}) {
    SCOPED_TRACE(span);
    ExpectMessage(OneError(std::string("namespace: iot.readings\npattern: bucket\nbucket:\n"
                                       "  collection: b\n  time: at\n  span: ") +
                           span + "\n"),
                  6, {"span"});
  }
}

TEST(RuleLoader, SpanAndGranularityBoth) {
  ExpectMessage(OneError("namespace: iot.readings\npattern: bucket\nbucket:\n  collection: b\n"
                         "  time: at\n  span: 1h\n  granularity: hour\n"),
                7, {"either 'span' or 'granularity', not both"});
}

TEST(RuleLoader, BadGranularity) {
  ExpectMessage(OneError("namespace: iot.readings\npattern: bucket\nbucket:\n  collection: b\n"
                         "  time: at\n  granularity: week\n"),
                6, {"granularity 'week'", "second, minute, hour, day"});
}

TEST(RuleLoader, SummaryOnMetaField) {
  ExpectMessage(OneError("namespace: iot.readings\npattern: bucket\nbucket:\n  collection: b\n"
                         "  meta: [sensor]\n  time: at\n  span: 1h\n  summaries:\n"
                         "    sensor: [min]\n"),
                9, {"summary field 'sensor'", "not the time or a meta field"});
}

TEST(RuleLoader, SummaryOnTimeField) {
  ExpectMessage(OneError("namespace: iot.readings\npattern: bucket\nbucket:\n  collection: b\n"
                         "  time: at\n  span: 1h\n  summaries:\n    at: [max]\n"),
                8, {"summary field 'at'", "not the time or a meta field"});
}

TEST(RuleLoader, SummaryNotInFields) {
  ExpectMessage(OneError("namespace: iot.readings\npattern: bucket\nbucket:\n  collection: b\n"
                         "  time: at\n  span: 1h\n  fields: [at, temp]\n  summaries:\n"
                         "    humidity: [sum]\n"),
                9, {"summary field 'humidity'", "not listed in 'fields'"});
}

TEST(RuleLoader, UnknownSummaryKind) {
  ExpectMessage(OneError("namespace: iot.readings\npattern: bucket\nbucket:\n  collection: b\n"
                         "  time: at\n  span: 1h\n  summaries:\n    temp: [sum, avg]\n"),
                8, {"unknown summary 'avg'", "sum, min or max"});
}

TEST(RuleLoader, EmptySummaryList) {
  ExpectMessage(OneError("namespace: iot.readings\npattern: bucket\nbucket:\n  collection: b\n"
                         "  time: at\n  span: 1h\n  summaries:\n    temp: []\n"),
                8, {"non-empty list of sum, min, max"});
}

TEST(RuleLoader, FieldsWithoutTimeField) {
  ExpectMessage(OneError("namespace: iot.readings\npattern: bucket\nbucket:\n  collection: b\n"
                         "  time: at\n  span: 1h\n  fields: [_id, temp]\n"),
                7, {"'fields' must include the time field 'at'"});
}

TEST(RuleLoader, MetaFieldNamedCountCollides) {
  ExpectMessage(OneError("namespace: iot.readings\npattern: bucket\nbucket:\n  collection: b\n"
                         "  meta: [sensor, count]\n  time: at\n  span: 1h\n"),
                5, {"meta field 'count' collides", "reserved"});
}

TEST(RuleLoader, MeasurementsNamedAsBucketTimeCollides) {
  ExpectMessage(OneError("namespace: iot.readings\npattern: bucket\nbucket:\n  collection: b\n"
                         "  time: at\n  span: 1h\n  bucket_time: t0\n  measurements: t0\n"),
                8, {"measurements 't0' collides"});
}

TEST(RuleLoader, TimeFieldAlsoMeta) {
  ExpectMessage(OneError("namespace: iot.readings\npattern: bucket\nbucket:\n  collection: b\n"
                         "  meta: [at]\n  time: at\n  span: 1h\n"),
                6, {"time field 'at' cannot also be a meta field"});
}

TEST(RuleLoader, DottedFieldName) {
  ExpectMessage(OneError("namespace: iot.readings\npattern: bucket\nbucket:\n  collection: b\n"
                         "  meta: [device.id]\n  time: at\n  span: 1h\n"),
                5, {"meta field 'device.id'", "top-level field name"});
}

TEST(RuleLoader, MaxCountOutOfRange) {
  for (const char* value : {"0", "100001", "-5", "ten", "1.5"}) {
    SCOPED_TRACE(value);
    ExpectMessage(OneError(std::string("namespace: iot.readings\npattern: bucket\nbucket:\n"
                                       "  collection: b\n  time: at\n  span: 1h\n  max_count: ") +
                           value + "\n"),
                  7, {"max_count must be an integer from 1 to 100000"});
  }
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

TEST(RuleLoader, BucketCollectionEqualToLogical) {
  ExpectMessage(OneError("namespace: iot.readings\npattern: bucket\nbucket:\n"
                         "  collection: readings\n  time: at\n  span: 1h\n"),
                4, {"bucket collection 'readings'", "other than the logical one"});
}

TEST(RuleLoader, TwoFilesForOneNamespace) {
  TempDir dir;
  std::string a = dir.Write("a.yaml", kValid);
  std::string b = dir.Write("b.yml", kValid);
  RuleLoadResult result = LoadRuleDirectory(dir.path().string());
  EXPECT_EQ(result.rules, nullptr);
  ASSERT_EQ(result.errors.size(), 1u);
  EXPECT_EQ(result.errors[0], b + ":1: namespace 'iot.readings' already has a rule in " + a +
                                  ", expected one rule file per collection");
}

TEST(RuleLoader, BucketCollectionIsAnotherRulesNamespace) {
  TempDir dir;
  dir.Write("a.yaml", kValid);
  std::string b = dir.Write(
      "b.yaml",
      "namespace: iot.readings_buckets\npattern: bucket\nbucket:\n  collection: x\n  time: at\n"
      "  span: 1h\n");
  RuleLoadResult result = LoadRuleDirectory(dir.path().string());
  EXPECT_EQ(result.rules, nullptr);
  ASSERT_EQ(result.errors.size(), 1u);
  EXPECT_NE(result.errors[0].find("bucket collection 'iot.readings_buckets' is itself the logical "
                                  "namespace of a rule"),
            std::string::npos)
      << result.errors[0];
}

TEST(RuleLoader, InvalidYamlReportsLine) {
  ExpectMessage(OneError("namespace: iot.readings\npattern: bucket\nbucket:\n  collection: b\n"
                         "  meta: [sensor\n  time: at\n"),
                // yaml-cpp reports the flow sequence left open at the line
                // where it notices; it must name a line of the file.
                6, {"invalid YAML"});
}

TEST(RuleLoader, InvalidYamlBadIndentation) {
  std::string message = OneError("namespace: iot.readings\npattern: bucket\nbucket:\n"
                                 "  collection: b\n   time: at\n");
  ExpectMessage(message, 5, {"invalid YAML"});
}

TEST(RuleLoader, NotAMapping) {
  ExpectMessage(OneError("- a\n- b\n"), 1, {"must be a mapping"});
}

TEST(RuleLoader, NonDirectory) {
  TempDir dir;
  std::string file = dir.Write("file.yaml", kValid);
  RuleLoadResult result = LoadRuleDirectory(file);
  EXPECT_EQ(result.rules, nullptr);
  ASSERT_EQ(result.errors.size(), 1u);
  EXPECT_EQ(result.errors[0], file + ": not a directory, expected the rules directory");

  RuleLoadResult missing = LoadRuleDirectory((dir.path() / "nope").string());
  EXPECT_EQ(missing.rules, nullptr);
  ASSERT_EQ(missing.errors.size(), 1u);
}

TEST(RuleLoader, EveryErrorOfADirectoryReported) {
  TempDir dir;
  std::string a = dir.Write("a.yaml", "namespace: iot\npattern: bucket\n");
  std::string b = dir.Write("b.yaml", "namespace: iot.b\npattern: other\n");
  dir.Write("c.yaml", kValid);
  RuleLoadResult result = LoadRuleDirectory(dir.path().string());
  EXPECT_EQ(result.rules, nullptr) << "one bad file keeps the whole set out";
  ASSERT_EQ(result.errors.size(), 2u);
  EXPECT_EQ(result.errors[0].rfind(a + ":1: ", 0), 0u) << result.errors[0];
  EXPECT_EQ(result.errors[1].rfind(b + ":2: ", 0), 0u) << result.errors[1];
}

TEST(RuleLoader, LoadRuleTextNamesSource) {
  RuleLoadResult result = LoadRuleText("namespace: iot\n", "inline.yaml");
  EXPECT_EQ(result.rules, nullptr);
  ASSERT_EQ(result.errors.size(), 1u);
  EXPECT_EQ(result.errors[0].rfind("inline.yaml:1: namespace 'iot'", 0), 0u) << result.errors[0];
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


// ---------------------------------------------------------------------------
// Attribute rules

// A valid attribute rule; tests break one thing at a time (line numbers:
// namespace 1, pattern 2, attribute 3, except 4).
const char* kAttribute = R"(namespace: shop.products
pattern: attribute
attribute:
  except: [name, price, category]
)";

TEST(AttributeRuleLoader, DefaultsWithExcept) {
  RuleLoadResult result = LoadRuleText(kAttribute, "products.yaml");
  ASSERT_TRUE(result.errors.empty()) << result.errors.front();
  ASSERT_TRUE(result.rules);
  const Rule* rule = result.rules->Find("shop", "products");
  ASSERT_TRUE(rule);
  EXPECT_EQ(rule->name, "products");
  const auto& a = std::get<AttributeRule>(rule->pattern);
  EXPECT_EQ(a.logical, (Namespace{"shop", "products"}));
  EXPECT_EQ(a.array_field, "specs");
  EXPECT_EQ(a.key_name, "k");
  EXPECT_EQ(a.value_name, "v");
  EXPECT_TRUE(a.fields.empty());
  EXPECT_EQ(a.except, (std::vector<std::string>{"name", "price", "category"}));
  EXPECT_TRUE(a.unfold);
  EXPECT_TRUE(a.fix_elem_match);
  // except mode: everything but _id, the array and the fixed fields.
  EXPECT_TRUE(a.IsAttribute("ram_gb"));
  EXPECT_FALSE(a.IsAttribute("name"));
  EXPECT_FALSE(a.IsAttribute("_id"));
  EXPECT_FALSE(a.IsAttribute("specs"));
  EXPECT_FALSE(a.IsAttribute("$and"));
}

TEST(AttributeRuleLoader, ValidRuleWithEveryOption) {
  TempDir dir;
  std::string source = dir.Write("catalog.yaml", R"(namespace: shop.catalog
pattern: attribute
attribute:
  array: props
  key: name
  value: val
  fields: [ram_gb, screen_in, watts]
  unfold: false
  fix_elem_match: false
)");
  dir.Write("products.yml", kAttribute);
  RuleLoadResult result = LoadRuleDirectory(dir.path().string());
  ASSERT_TRUE(result.errors.empty()) << result.errors.front();
  ASSERT_TRUE(result.rules);
  ASSERT_EQ(result.rules->rules().size(), 2u);
  const Rule* rule = result.rules->Find("shop", "catalog");
  ASSERT_TRUE(rule);
  EXPECT_EQ(rule->name, "catalog");
  EXPECT_EQ(rule->source, source);
  const auto& a = std::get<AttributeRule>(rule->pattern);
  EXPECT_EQ(a.logical, (Namespace{"shop", "catalog"}));
  EXPECT_EQ(a.array_field, "props");
  EXPECT_EQ(a.key_name, "name");
  EXPECT_EQ(a.value_name, "val");
  EXPECT_EQ(a.fields, (std::vector<std::string>{"ram_gb", "screen_in", "watts"}));
  EXPECT_TRUE(a.except.empty());
  EXPECT_FALSE(a.unfold);
  EXPECT_FALSE(a.fix_elem_match);
  // fields mode: only the listed fields.
  EXPECT_TRUE(a.IsAttribute("watts"));
  EXPECT_FALSE(a.IsAttribute("color"));
  EXPECT_FALSE(a.IsAttribute("props"));
  EXPECT_FALSE(a.IsAttribute("_id"));
  ASSERT_TRUE(result.rules->Find("shop", "products"));
  EXPECT_TRUE(std::holds_alternative<AttributeRule>(result.rules->Find("shop", "products")->pattern));
}

TEST(AttributeRuleLoader, ExplicitTrueBooleans) {
  RuleLoadResult result = LoadRuleText(std::string(kAttribute) +
                                           "  unfold: true\n  fix_elem_match: true\n",
                                       "r.yaml");
  ASSERT_TRUE(result.errors.empty()) << result.errors.front();
  const auto& a = std::get<AttributeRule>(result.rules->rules()[0].pattern);
  EXPECT_TRUE(a.unfold);
  EXPECT_TRUE(a.fix_elem_match);
}

TEST(AttributeRuleLoader, UnknownKey) {
  ExpectMessage(OneError(std::string(kAttribute) + "  arrey: props\n"), 5,
                {"unknown key 'arrey'", "'attribute'", "expected one of:", "array", "except",
                 "fields", "fix_elem_match", "key", "unfold", "value"});
}

TEST(AttributeRuleLoader, MissingSection) {
  ExpectMessage(OneError("namespace: shop.products\npattern: attribute\n"), 1,
                {"missing 'attribute' section"});
}

TEST(AttributeRuleLoader, SectionNotAMapping) {
  ExpectMessage(OneError("namespace: shop.products\npattern: attribute\nattribute: [specs]\n"), 3,
                {"'attribute' must be a mapping"});
}

TEST(AttributeRuleLoader, BucketSectionInAttributeRule) {
  ExpectMessage(OneError(std::string(kAttribute) + "bucket:\n  collection: b\n"), 5,
                {"section 'bucket' does not belong to pattern 'attribute'"});
}

TEST(AttributeRuleLoader, AttributeSectionInBucketRule) {
  ExpectMessage(OneError(std::string(kValid) + "attribute:\n  except: [name]\n"), 10,
                {"section 'attribute' does not belong to pattern 'bucket'"});
}

TEST(AttributeRuleLoader, BothFieldsAndExcept) {
  ExpectMessage(OneError(std::string(kAttribute) + "  fields: [ram_gb]\n"), 4,
                {"either 'fields'", "'except'", "not both"});
}

TEST(AttributeRuleLoader, NeitherFieldsNorExcept) {
  ExpectMessage(OneError("namespace: shop.products\npattern: attribute\nattribute:\n"
                         "  array: specs\n"),
                4, {"either 'fields'", "'except'", "not neither"});
}

TEST(AttributeRuleLoader, EmptyFields) {
  ExpectMessage(OneError("namespace: shop.products\npattern: attribute\nattribute:\n"
                         "  fields: []\n"),
                4, {"'fields' must list at least one attribute"});
}

TEST(AttributeRuleLoader, FieldsNotAList) {
  ExpectMessage(OneError("namespace: shop.products\npattern: attribute\nattribute:\n"
                         "  fields: ram_gb\n"),
                4, {"'fields' must be a list of field names"});
}

TEST(AttributeRuleLoader, KeyEqualsValue) {
  ExpectMessage(OneError(std::string(kAttribute) + "  key: name\n  value: name\n"), 6,
                {"'key' and 'value' must be different names"});
  // The defaults count too: key: v collides with the default value name.
  ExpectMessage(OneError(std::string(kAttribute) + "  key: v\n"), 4,
                {"'key' and 'value' must be different names"});
}

TEST(AttributeRuleLoader, IdCannotBeAnAttribute) {
  ExpectMessage(OneError("namespace: shop.products\npattern: attribute\nattribute:\n"
                         "  fields: [ram_gb, _id]\n"),
                4, {"'_id' cannot be an attribute"});
}

TEST(AttributeRuleLoader, ArrayCannotBeAnAttribute) {
  ExpectMessage(OneError("namespace: shop.products\npattern: attribute\nattribute:\n"
                         "  fields: [ram_gb, specs]\n"),
                4, {"'specs' cannot be an attribute"});
  ExpectMessage(OneError("namespace: shop.products\npattern: attribute\nattribute:\n"
                         "  array: props\n  fields: [props]\n"),
                5, {"'props' cannot be an attribute"});
}

TEST(AttributeRuleLoader, BadBool) {
  for (const char* value : {"yes", "1", "maybe", "[true]"}) {
    SCOPED_TRACE(value);
    ExpectMessage(OneError(std::string(kAttribute) + "  unfold: " + value + "\n"), 5,
                  {"'unfold' must be true or false"});
    ExpectMessage(OneError(std::string(kAttribute) + "  fix_elem_match: " + value + "\n"), 5,
                  {"'fix_elem_match' must be true or false"});
  }
}

TEST(AttributeRuleLoader, BadNames) {
  struct Case {
    const char* line;
    const char* what;
  };
  for (const Case& c : {Case{"  array: a.b\n", "array 'a.b'"}, Case{"  array: $specs\n", "array '$specs'"},
                        Case{"  key: k.x\n", "key 'k.x'"}, Case{"  value: $v\n", "value '$v'"},
                        Case{"  array: ''\n", "array ''"}}) {
    SCOPED_TRACE(c.line);
    ExpectMessage(OneError(std::string(kAttribute) + c.line), 5, {c.what, "top-level field name"});
  }
  ExpectMessage(OneError("namespace: shop.products\npattern: attribute\nattribute:\n"
                         "  fields: [dims.w]\n"),
                4, {"attribute field 'dims.w'", "top-level field name"});
  ExpectMessage(OneError("namespace: shop.products\npattern: attribute\nattribute:\n"
                         "  except: [$name]\n"),
                4, {"fixed field '$name'", "top-level field name"});
}

TEST(AttributeRuleLoader, NamespaceOfABucketCollection) {
  // An attribute rule on a bucket rule's bucket collection would rewrite the
  // bucket documents the bucket rule writes.
  TempDir dir;
  dir.Write("a.yaml", kValid);
  dir.Write("b.yaml", "namespace: iot.readings_buckets\npattern: attribute\nattribute:\n"
                      "  except: [sensor]\n");
  RuleLoadResult result = LoadRuleDirectory(dir.path().string());
  EXPECT_EQ(result.rules, nullptr);
  ASSERT_EQ(result.errors.size(), 1u);
  EXPECT_NE(result.errors[0].find("bucket collection 'iot.readings_buckets' is itself the logical "
                                  "namespace of a rule"),
            std::string::npos)
      << result.errors[0];
}


// ---------------------------------------------------------------------------
// Computed rules

// The valid cross-collection rule; tests break one thing at a time.
const char* kComputed = R"(namespace: blog.comments
pattern: computed
computed:
  aggregates:
    - target: posts
      link: postId
      fields:
        commentCount: count
        replies: {count: true}
        starSum: {sum: stars}
        firstAt: {min: createdAt}
        lastAt: {max: createdAt}
        lastBy: {latest: author, by: createdAt}
      derived:
        avgStars: {divide: [starSum, commentCount]}
    - target: people.authors
      link: {from: author, to: name}
      create_target: true
      fields:
        comments: count
)";

// A computed rule as the text of c.yaml: its one error, whole.
std::string ComputedError(const std::string& text) {
  RuleLoadResult result = LoadRuleText(text, "c.yaml");
  EXPECT_EQ(result.rules, nullptr) << "a file with a mistake must yield no RuleSet";
  EXPECT_EQ(result.errors.size(), 1u) << text;
  return result.errors.empty() ? "" : result.errors.front();
}

// The ComputedRule of `text`, which must load.
ComputedRule LoadComputed(const std::string& text) {
  RuleLoadResult result = LoadRuleText(text, "c.yaml");
  EXPECT_TRUE(result.errors.empty()) << result.errors.front() << "\n" << text;
  if (!result.rules || result.rules->rules().size() != 1) return {};
  return std::get<ComputedRule>(result.rules->rules()[0].pattern);
}

const std::string kHead = "namespace: blog.comments\npattern: computed\ncomputed:\n";

// Lines 1-4 are kHead and "  fields:"; `out` is on line 5.
std::string WithExpression(const std::string& expression) {
  return kHead + "  fields:\n    out: " + expression + "\n";
}

// Lines 1-7 are kHead and an aggregate of posts; the fields start on line 8.
std::string WithMaintained(const std::string& fields) {
  return kHead + "  aggregates:\n    - target: posts\n      link: postId\n      fields:\n" + fields;
}

TEST(ComputedRuleLoader, ValidCrossCollectionRule) {
  TempDir dir;
  std::string source = dir.Write("comments.yaml", kComputed);
  RuleLoadResult result = LoadRuleDirectory(dir.path().string());
  ASSERT_TRUE(result.errors.empty()) << result.errors.front();
  ASSERT_TRUE(result.rules);
  const Rule* rule = result.rules->Find("blog", "comments");
  ASSERT_TRUE(rule);
  EXPECT_EQ(rule->name, "comments");
  EXPECT_EQ(rule->source, source);
  const auto& c = std::get<ComputedRule>(rule->pattern);
  EXPECT_EQ(c.logical, (Namespace{"blog", "comments"}));
  EXPECT_TRUE(c.fields.empty());
  EXPECT_EQ(c.on_client_write, ComputedRule::ClientWrite::kReject);  // the default
  ASSERT_EQ(c.aggregates.size(), 2u);

  const ComputedAggregate& posts = c.aggregates[0];
  EXPECT_EQ(posts.target, (Namespace{"blog", "posts"}));  // the rule's database
  EXPECT_EQ(posts.link_from, "postId");
  EXPECT_EQ(posts.link_to, "_id");
  EXPECT_FALSE(posts.create_target);
  ASSERT_EQ(posts.fields.size(), 6u);
  using Op = MaintainedField::Op;
  struct Expected {
    const char* field;
    Op op;
    const char* of;
    const char* by;
    const char* by_field;
  };
  const Expected expected[] = {
      {"commentCount", Op::kCount, "", "", ""}, {"replies", Op::kCount, "", "", ""},
      {"starSum", Op::kSum, "stars", "", ""},   {"firstAt", Op::kMin, "createdAt", "", ""},
      {"lastAt", Op::kMax, "createdAt", "", ""}, {"lastBy", Op::kLatest, "author", "createdAt", "lastAt"},
  };
  for (size_t i = 0; i < std::size(expected); ++i) {
    SCOPED_TRACE(expected[i].field);
    EXPECT_EQ(posts.fields[i].field, expected[i].field);
    EXPECT_EQ(posts.fields[i].op, expected[i].op);
    EXPECT_EQ(posts.fields[i].of, expected[i].of);
    EXPECT_EQ(posts.fields[i].by, expected[i].by);
    EXPECT_EQ(posts.fields[i].by_field, expected[i].by_field);
  }
  ASSERT_EQ(posts.derived.size(), 1u);
  EXPECT_EQ(posts.derived[0].field, "avgStars");
  EXPECT_EQ(posts.derived[0].inputs, (std::vector<std::string>{"commentCount", "starSum"}));
  const Expression& avg = posts.derived[0].expression;
  EXPECT_EQ(avg.kind, Expression::Kind::kDivide);
  ASSERT_EQ(avg.operands.size(), 2u);
  EXPECT_EQ(avg.operands[0].kind, Expression::Kind::kField);
  EXPECT_EQ(avg.operands[0].path, "starSum");
  EXPECT_EQ(avg.operands[1].path, "commentCount");
  // The link first, then each source field once.
  EXPECT_EQ(posts.inputs, (std::vector<std::string>{"postId", "stars", "createdAt", "author"}));

  const ComputedAggregate& authors = c.aggregates[1];
  EXPECT_EQ(authors.target, (Namespace{"people", "authors"}));
  EXPECT_EQ(authors.link_from, "author");
  EXPECT_EQ(authors.link_to, "name");
  EXPECT_TRUE(authors.create_target);
  ASSERT_EQ(authors.fields.size(), 1u);
  EXPECT_EQ(authors.fields[0].op, Op::kCount);
  EXPECT_TRUE(authors.derived.empty());
  EXPECT_EQ(authors.inputs, (std::vector<std::string>{"author"}));
}

TEST(ComputedRuleLoader, TargetAndLinkForms) {
  ComputedRule c = LoadComputed(kHead +
                                "  aggregates:\n"
                                "    - target: blog.posts\n"
                                "      link: {from: postId}\n"
                                "      create_target: false\n"
                                "      fields: {n: count}\n"
                                "    - target: stats.daily.posts\n"
                                "      link: {from: postId, to: post}\n"
                                "      fields: {n: count}\n"
                                "  on_client_write: overwrite\n");
  ASSERT_EQ(c.aggregates.size(), 2u);
  EXPECT_EQ(c.aggregates[0].target, (Namespace{"blog", "posts"}));
  EXPECT_EQ(c.aggregates[0].link_from, "postId");
  EXPECT_EQ(c.aggregates[0].link_to, "_id");
  EXPECT_FALSE(c.aggregates[0].create_target);
  // A collection name may hold dots: the database is up to the first.
  EXPECT_EQ(c.aggregates[1].target, (Namespace{"stats", "daily.posts"}));
  EXPECT_EQ(c.aggregates[1].link_to, "post");
  EXPECT_EQ(c.on_client_write, ComputedRule::ClientWrite::kOverwrite);
}

TEST(ComputedRuleLoader, SameDocumentFields) {
  ComputedRule c = LoadComputed(kHead +
                                "  fields:\n"
                                "    total: {sum: {each: items, of: {product: [price, qty]}}}\n"
                                "    itemCount: {count: items}\n"
                                "    label: {concat: [first, {literal: \" \"}, last]}\n"
                                "    top: {max: {each: items, of: price}}\n"
                                "    avg: {divide: [sum, n]}\n"
                                "    deep: {min: [a.b.c, 2, -1.5, {literal: null}, {literal: true}]}\n"
                                "    byKeyOrder: {of: qty, each: items}\n"
                                "  on_client_write: reject\n");
  ASSERT_EQ(c.fields.size(), 7u);
  EXPECT_TRUE(c.aggregates.empty());
  EXPECT_EQ(c.on_client_write, ComputedRule::ClientWrite::kReject);
  EXPECT_EQ(c.fields[0].field, "total");
  // Paths inside `each` name fields of the element, not of the document.
  EXPECT_EQ(c.fields[0].inputs, (std::vector<std::string>{"items"}));
  const Expression& total = c.fields[0].expression;
  EXPECT_EQ(total.kind, Expression::Kind::kSum);
  ASSERT_EQ(total.operands.size(), 1u);
  EXPECT_EQ(total.operands[0].kind, Expression::Kind::kEach);
  EXPECT_EQ(total.operands[0].path, "items");
  ASSERT_EQ(total.operands[0].operands.size(), 1u);
  EXPECT_EQ(total.operands[0].operands[0].kind, Expression::Kind::kProduct);
  EXPECT_EQ(c.fields[1].expression.kind, Expression::Kind::kCount);
  EXPECT_EQ(c.fields[1].expression.path, "items");
  EXPECT_EQ(c.fields[2].inputs, (std::vector<std::string>{"first", "last"}));
  const Expression& space = c.fields[2].expression.operands.at(1);
  EXPECT_EQ(space.kind, Expression::Kind::kLiteral);
  EXPECT_EQ(space.literal, Expression::Literal(std::string(" ")));
  EXPECT_EQ(c.fields[3].expression.kind, Expression::Kind::kMax);
  EXPECT_EQ(c.fields[4].inputs, (std::vector<std::string>{"n", "sum"}));
  const Expression& deep = c.fields[5].expression;
  EXPECT_EQ(c.fields[5].inputs, (std::vector<std::string>{"a"}));
  ASSERT_EQ(deep.operands.size(), 5u);
  EXPECT_EQ(deep.operands[0].path, "a.b.c");
  EXPECT_EQ(deep.operands[1].literal, Expression::Literal(int64_t{2}));
  EXPECT_EQ(deep.operands[2].literal, Expression::Literal(-1.5));
  EXPECT_EQ(deep.operands[3].literal, Expression::Literal(std::monostate{}));
  EXPECT_EQ(deep.operands[4].literal, Expression::Literal(true));
  // A mapping's keys have no order: {of, each} is an each.
  EXPECT_EQ(c.fields[6].expression.kind, Expression::Kind::kEach);
  EXPECT_EQ(c.fields[6].inputs, (std::vector<std::string>{"items"}));
}

TEST(ComputedRuleLoader, Literals) {
  struct Case {
    const char* yaml;
    Expression::Literal literal;
  };
  for (const Case& c : {Case{"{literal: 5}", int64_t{5}}, Case{"{literal: 2.5}", 2.5},
                        Case{"{literal: \"5\"}", std::string("5")},
                        Case{"{literal: 'true'}", std::string("true")},
                        Case{"{literal: false}", false}, Case{"{literal: ~}", std::monostate{}},
                        Case{"{literal: }", std::monostate{}}, Case{"{literal: word}", std::string("word")},
                        Case{"7", int64_t{7}}, Case{"-7", int64_t{-7}}, Case{"1e3", 1000.0}}) {
    SCOPED_TRACE(c.yaml);
    ComputedRule rule = LoadComputed(WithExpression(c.yaml));
    ASSERT_EQ(rule.fields.size(), 1u);
    EXPECT_EQ(rule.fields[0].expression.kind, Expression::Kind::kLiteral);
    EXPECT_EQ(rule.fields[0].expression.literal, c.literal);
    EXPECT_TRUE(rule.fields[0].inputs.empty());
  }
  // Plain scalars that are not numbers are field paths: "true", and the
  // words from_chars would read as numbers (nan, inf, infinity).
  for (const char* path : {"true", "nan", "inf", "-Infinity", "\"7\"", "x1"}) {
    SCOPED_TRACE(path);
    ComputedRule rule = LoadComputed(WithExpression(path));
    ASSERT_EQ(rule.fields.size(), 1u);
    EXPECT_EQ(rule.fields[0].expression.kind, Expression::Kind::kField);
  }
}

TEST(ComputedRuleLoader, ExpressionNestingLimit) {
  auto nested = [](int sums) {
    std::string e = "a";
    for (int i = 0; i < sums; ++i) e = "{sum: " + e + "}";
    return e;
  };
  EXPECT_EQ(LoadComputed(WithExpression(nested(32))).fields.size(), 1u);
  EXPECT_EQ(ComputedError(WithExpression(nested(33))),
            "c.yaml:5: expression nested too deeply (at most 32 levels)");
}

TEST(ComputedRuleLoader, ExpressionErrors) {
  const std::string ops = "concat, count, divide, each, literal, max, min, product, sum";
  struct Case {
    const char* yaml;
    std::string message;
  };
  for (const Case& c : {
           Case{"''", "field path '' must be field names joined by '.', without '$'"},
           Case{".a", "field path '.a' must be field names joined by '.', without '$'"},
           Case{"a.", "field path 'a.' must be field names joined by '.', without '$'"},
           Case{"a..b", "field path 'a..b' must be field names joined by '.', without '$'"},
           Case{"$a", "field path '$a' must be field names joined by '.', without '$'"},
           Case{"{sum: [a, b.$c]}", "field path 'b.$c' must be field names joined by '.', without '$'"},
           Case{"[a, b]", "an expression must be a field path, a number, or a mapping with one of: " + ops},
           Case{"{}", "an expression must be a field path, a number, or a mapping with one of: " + ops},
           Case{"~", "an expression must be a field path, a number, or a mapping with one of: " + ops},
           Case{"null", "an expression must be a field path, a number, or a mapping with one of: " + ops},
           Case{"{sum: [a, ~]}", "an expression must be a field path, a number, or a mapping with one of: " + ops},
           Case{"{avg: [a, b]}", "unknown expression operator 'avg', expected one of: " + ops},
           Case{"{sum: a, max: b}", "an expression mapping has one operator, found 2 keys"},
           Case{"{literal: [1]}", "'literal' must be a number, string, true, false or null"},
           Case{"{literal: {a: 1}}", "'literal' must be a number, string, true, false or null"},
           Case{"{count: [items]}", "'count' must name an array field"},
           Case{"{count: a..b}", "field path 'a..b' must be field names joined by '.', without '$'"},
           Case{"{sum: []}", "'sum' needs at least one operand"},
           Case{"{concat: []}", "'concat' needs at least one operand"},
           Case{"{divide: [a]}", "'divide' takes exactly two operands: [dividend, divisor]"},
           Case{"{divide: [a, b, c]}", "'divide' takes exactly two operands: [dividend, divisor]"},
           Case{"{divide: a}", "'divide' takes exactly two operands: [dividend, divisor]"},
           Case{"{each: items, of: price, as: x}", "unknown key 'as' in 'each', expected one of: each, of"},
           Case{"{each: [items], of: price}", "'each' must name an array field"},
           Case{"{each: $items, of: price}", "field path '$items' must be field names joined by '.', without '$'"},
           Case{"{each: items}", "'each' needs 'of', the expression for one element"},
           Case{"{each: items, of: {bad: 1}}", "unknown expression operator 'bad', expected one of: " + ops},
       }) {
    SCOPED_TRACE(c.yaml);
    EXPECT_EQ(ComputedError(WithExpression(c.yaml)), "c.yaml:5: " + c.message);
  }
}

TEST(ComputedRuleLoader, AggregateOfAComputedFieldIsRefused) {
  // The repair of `total` after an update is not itself maintained: an
  // aggregate must read stored inputs.
  EXPECT_EQ(ComputedError(kHead +
                          "  aggregates:\n"
                          "    - target: customers\n"
                          "      link: customerId\n"
                          "      fields: {spent: {sum: total}}\n"
                          "  fields:\n"
                          "    total: {sum: {each: items, of: price}}\n"),
            "c.yaml:5: the aggregate reads 'total', a computed field of this collection; aggregates "
            "are maintained from stored fields only (aggregate its inputs)");
}

TEST(ComputedRuleLoader, ExpressionErrorLinesPointAtTheNode) {
  EXPECT_EQ(ComputedError(kHead + "  fields:\n    out:\n      sum:\n        - a\n        - b..c\n"),
            "c.yaml:8: field path 'b..c' must be field names joined by '.', without '$'");
  EXPECT_EQ(ComputedError(kHead + "  fields:\n    out:\n      each: items\n      off: price\n"),
            "c.yaml:7: unknown key 'off' in 'each', expected one of: each, of");
}

TEST(ComputedRuleLoader, ComputedFieldErrors) {
  EXPECT_EQ(ComputedError(kHead + "  fields: [a]\n"),
            "c.yaml:4: 'fields' must map field names to expressions");
  EXPECT_EQ(ComputedError(kHead + "  fields: {}\n"),
            "c.yaml:4: 'fields' must map field names to expressions");
  EXPECT_EQ(ComputedError(kHead + "  fields:\n    a.b: x\n"),
            "c.yaml:5: computed field 'a.b' must be a top-level field name (no '.', not starting "
            "with '$')");
  EXPECT_EQ(ComputedError(kHead + "  fields:\n    $t: x\n"),
            "c.yaml:5: computed field '$t' must be a top-level field name (no '.', not starting "
            "with '$')");
  EXPECT_EQ(ComputedError(kHead + "  fields:\n    _id: x\n"),
            "c.yaml:5: '_id' cannot be a computed field");
  EXPECT_EQ(ComputedError(kHead + "  fields:\n    total: x\n    total: y\n"),
            "c.yaml:6: computed field 'total' is defined twice");
  EXPECT_EQ(ComputedError(kHead + "  fields:\n    total: {sum: [a, b]}\n    double: {product: [total, 2]}\n"),
            "c.yaml:5: computed field 'double' reads computed field 'total', expected expressions "
            "over stored fields only");
  EXPECT_EQ(ComputedError(kHead + "  fields:\n    total: {sum: [total, b]}\n"),
            "c.yaml:5: computed field 'total' reads computed field 'total', expected expressions "
            "over stored fields only");
  // A dotted path reads its top-level field.
  EXPECT_EQ(ComputedError(kHead + "  fields:\n    t: {max: [s.x, 1]}\n    s: a\n"),
            "c.yaml:5: computed field 't' reads computed field 's', expected expressions over "
            "stored fields only");
  // Inside each, paths name the element's fields: no conflict.
  EXPECT_EQ(LoadComputed(kHead + "  fields:\n    total: {sum: {each: items, of: total}}\n").fields.size(),
            1u);
}

TEST(ComputedRuleLoader, SectionErrors) {
  EXPECT_EQ(ComputedError("namespace: blog.comments\npattern: computed\n"),
            "c.yaml:1: missing 'computed' section, expected the computed rule's options");
  EXPECT_EQ(ComputedError(kHead.substr(0, kHead.size() - 1) + " [a]\n"),
            "c.yaml:3: 'computed' must be a mapping of options");
  EXPECT_EQ(ComputedError(kHead + "  fields: {t: a}\n  on_write: reject\n"),
            "c.yaml:5: unknown key 'on_write' in 'computed', expected one of: aggregates, fields, "
            "on_client_write");
  EXPECT_EQ(ComputedError(kHead + "  on_client_write: reject\n"),
            "c.yaml:4: a computed rule needs 'aggregates', 'fields', or both");
  EXPECT_EQ(ComputedError(kHead + "  fields: {t: a}\n  on_client_write: ignore\n"),
            "c.yaml:5: 'on_client_write' must be reject or overwrite");
  EXPECT_EQ(ComputedError(kHead + "  fields: {t: a}\n  on_client_write: [reject]\n"),
            "c.yaml:5: 'on_client_write' must be a string");
  EXPECT_EQ(ComputedError(kHead + "  aggregates: []\n"),
            "c.yaml:4: 'aggregates' must be a list of {target, link, fields}");
  EXPECT_EQ(ComputedError(kHead + "  aggregates: {target: posts}\n"),
            "c.yaml:4: 'aggregates' must be a list of {target, link, fields}");
  EXPECT_EQ(ComputedError(kHead + "  fields: {t: a}\nbucket:\n  collection: b\n"),
            "c.yaml:5: section 'bucket' does not belong to pattern 'computed'");
  EXPECT_EQ(ComputedError(std::string(kAttribute) + "computed:\n  fields: {t: a}\n"),
            "c.yaml:5: section 'computed' does not belong to pattern 'attribute'");
}

TEST(ComputedRuleLoader, AggregateErrors) {
  const std::string list = kHead + "  aggregates:\n";  // entries from line 5
  EXPECT_EQ(ComputedError(list + "    - posts\n"),
            "c.yaml:5: an aggregate must be a mapping with target, link and fields");
  EXPECT_EQ(ComputedError(list + "    - {target: posts, link: postId, fields: {n: count}, when: x}\n"),
            "c.yaml:5: unknown key 'when' in an aggregate, expected one of: create_target, derived, "
            "fields, link, target");
  EXPECT_EQ(ComputedError(list + "    - link: postId\n      fields: {n: count}\n"),
            "c.yaml:5: missing 'target' in an aggregate, expected a string");
  EXPECT_EQ(ComputedError(list + "    - target: [posts]\n      link: postId\n      fields: {n: count}\n"),
            "c.yaml:5: 'target' must be a string");
  for (const char* target : {"blog.", ".posts", "blog.po$ts"}) {
    SCOPED_TRACE(target);
    EXPECT_EQ(ComputedError(list + "    - target: " + target + "\n      link: postId\n"
                                   "      fields: {n: count}\n"),
              "c.yaml:5: namespace '" + std::string(target) + "' must be 'database.collection'");
  }
  EXPECT_EQ(ComputedError(list + "    - target: ''\n      link: postId\n      fields: {n: count}\n"),
            "c.yaml:5: target '' must be 'collection' or 'database.collection'");
  EXPECT_EQ(ComputedError(list + "    - target: po$ts\n      link: postId\n      fields: {n: count}\n"),
            "c.yaml:5: target 'po$ts' must be 'collection' or 'database.collection'");
  for (const char* target : {"comments", "blog.comments"}) {
    SCOPED_TRACE(target);
    EXPECT_EQ(ComputedError(list + "    - target: " + target + "\n      link: postId\n"
                                   "      fields: {n: count}\n"),
              "c.yaml:5: the target is the rule's own collection; use 'fields' for same-document "
              "values");
  }
  // Another database's collection of the same name is another collection.
  EXPECT_EQ(LoadComputed(list + "    - target: archive.comments\n      link: postId\n"
                                "      fields: {n: count}\n").aggregates.size(),
            1u);
  EXPECT_EQ(ComputedError(list + "    - target: posts\n      fields: {n: count}\n"),
            "c.yaml:5: missing 'link' in an aggregate, expected {from: <source field>, to: <target "
            "field>}");
  EXPECT_EQ(ComputedError(list + "    - target: posts\n      link: post.id\n      fields: {n: count}\n"),
            "c.yaml:6: link field 'post.id' must be a top-level field name (no '.', not starting "
            "with '$')");
  EXPECT_EQ(ComputedError(list + "    - target: posts\n      link: [postId]\n      fields: {n: count}\n"),
            "c.yaml:6: 'link' must be a source field name or {from: <source field>, to: <target "
            "field>}");
  EXPECT_EQ(ComputedError(list + "    - target: posts\n      link: {from: postId, on: _id}\n"
                                 "      fields: {n: count}\n"),
            "c.yaml:6: unknown key 'on' in 'link', expected one of: from, to");
  EXPECT_EQ(ComputedError(list + "    - target: posts\n      link: {to: _id}\n      fields: {n: count}\n"),
            "c.yaml:6: missing 'from' in 'link', expected a string");
  EXPECT_EQ(ComputedError(list + "    - target: posts\n      link: {from: $postId}\n"
                                 "      fields: {n: count}\n"),
            "c.yaml:6: link field '$postId' must be a top-level field name (no '.', not starting "
            "with '$')");
  EXPECT_EQ(ComputedError(list + "    - target: posts\n      link: {from: postId, to: a.b}\n"
                                 "      fields: {n: count}\n"),
            "c.yaml:6: link field 'a.b' must be a top-level field name (no '.', not starting with "
            "'$')");
  EXPECT_EQ(ComputedError(list + "    - target: posts\n      link: {from: postId, to: [a]}\n"
                                 "      fields: {n: count}\n"),
            "c.yaml:6: 'to' must be a string");
  EXPECT_EQ(ComputedError(list + "    - target: posts\n      link: postId\n      create_target: yes\n"
                                 "      fields: {n: count}\n"),
            "c.yaml:7: 'create_target' must be true or false");
  EXPECT_EQ(ComputedError(list + "    - target: posts\n      link: postId\n"),
            "c.yaml:5: 'fields' must map target field names to count, sum, min, max or latest");
  EXPECT_EQ(ComputedError(list + "    - target: posts\n      link: postId\n      fields: [n]\n"),
            "c.yaml:7: 'fields' must map target field names to count, sum, min, max or latest");
  EXPECT_EQ(ComputedError(list + "    - target: posts\n      link: postId\n      fields: {}\n"),
            "c.yaml:7: 'fields' must map target field names to count, sum, min, max or latest");
}

TEST(ComputedRuleLoader, MaintainedFieldErrors) {
  const std::string expected = "expected count, {sum: F}, {min: F}, {max: F} or {latest: F, by: G}";
  struct Case {
    const char* line;  // line 8
    std::string message;
  };
  for (const Case& c : {
           Case{"n.x: count", "maintained field 'n.x' must be a top-level field name (no '.', not "
                              "starting with '$')"},
           Case{"_id: count", "'_id' identifies the target; it cannot be maintained"},
           Case{"n: sum", "maintained field 'n': " + expected},
           Case{"n: [count]", "maintained field 'n': " + expected},
           Case{"n: {}", "maintained field 'n': " + expected},
           Case{"n: {avg: stars}", "maintained field 'n': unknown 'avg', " + expected},
           Case{"n: {count: false}", "maintained field 'n': write 'count' or {count: true}"},
           Case{"n: {count: [true]}", "maintained field 'n': write 'count' or {count: true}"},
           Case{"n: {count: true, of: x}", "unknown key 'of' in 'n', expected one of: count"},
           Case{"n: {sum: stars, by: at}", "unknown key 'by' in 'n', expected one of: sum"},
           Case{"n: {sum: [stars]}", "'sum' must be a string"},
           Case{"n: {min: a.b}", "source field 'a.b' must be a top-level field name (no '.', not "
                                 "starting with '$')"},
           Case{"n: {max: $at}", "source field '$at' must be a top-level field name (no '.', not "
                                 "starting with '$')"},
           Case{"n: {latest: author}", "missing 'by' in 'n' (the field that orders 'latest'), "
                                       "expected a string"},
           Case{"n: {latest: author, by: at, of: x}", "unknown key 'of' in 'n', expected one of: by, "
                                                      "latest"},
           Case{"n: {latest: author, by: a.t}", "source field 'a.t' must be a top-level field name "
                                                "(no '.', not starting with '$')"},
           Case{"n: {latest: [author], by: at}", "'latest' must be a string"},
       }) {
    SCOPED_TRACE(c.line);
    EXPECT_EQ(ComputedError(WithMaintained(std::string("        ") + c.line + "\n")),
              "c.yaml:8: " + c.message);
  }
  // The link's target field identifies the target too.
  EXPECT_EQ(ComputedError(kHead + "  aggregates:\n    - target: posts\n"
                                  "      link: {from: postId, to: key}\n      fields:\n"
                                  "        key: count\n"),
            "c.yaml:8: 'key' identifies the target; it cannot be maintained");
  EXPECT_EQ(ComputedError(WithMaintained("        n: count\n        n: {sum: stars}\n")),
            "c.yaml:9: field 'n' is maintained twice");
  EXPECT_EQ(ComputedError(WithMaintained("        last: {latest: author, by: at}\n")),
            "c.yaml:8: 'last' is the latest by 'at': declare a field {max: at} beside it");
  // A max of another field does not order it; a min of the same field neither.
  EXPECT_EQ(ComputedError(WithMaintained("        first: {min: at}\n        other: {max: x}\n"
                                         "        last: {latest: author, by: at}\n")),
            "c.yaml:10: 'last' is the latest by 'at': declare a field {max: at} beside it");
  // Key order does not matter, and the max may come after.
  ComputedRule c = LoadComputed(WithMaintained("        last: {by: at, latest: author}\n"
                                               "        lastAt: {max: at}\n"));
  ASSERT_EQ(c.aggregates.size(), 1u);
  ASSERT_EQ(c.aggregates[0].fields.size(), 2u);
  EXPECT_EQ(c.aggregates[0].fields[0].op, MaintainedField::Op::kLatest);
  EXPECT_EQ(c.aggregates[0].fields[0].of, "author");
  EXPECT_EQ(c.aggregates[0].fields[0].by, "at");
  EXPECT_EQ(c.aggregates[0].fields[0].by_field, "lastAt");
}

TEST(ComputedRuleLoader, DerivedFieldErrors) {
  const std::string base = WithMaintained("        n: count\n        s: {sum: stars}\n");  // to line 9
  EXPECT_EQ(ComputedError(base + "      derived: [a]\n"),
            "c.yaml:10: 'derived' must map field names to expressions");
  EXPECT_EQ(ComputedError(base + "      derived:\n        n: {divide: [s, 2]}\n"),
            "c.yaml:11: field 'n' is both maintained and derived");
  EXPECT_EQ(ComputedError(base + "      derived:\n        avg: {divide: [s, count]}\n"),
            "c.yaml:11: derived field 'avg' reads 'count', expected only maintained fields of this "
            "aggregate");
  EXPECT_EQ(ComputedError(base + "      derived:\n        avg: {divide: [s, n]}\n        twice: {product: [avg, 2]}\n"),
            "c.yaml:11: computed field 'twice' reads computed field 'avg', expected expressions over "
            "stored fields only");
  EXPECT_EQ(ComputedError(base + "      derived:\n        _id: {divide: [s, n]}\n"),
            "c.yaml:11: '_id' cannot be a computed field");
  EXPECT_EQ(ComputedError(base + "      derived:\n        avg: {divide: [s, n]}\n        avg: s\n"),
            "c.yaml:12: computed field 'avg' is defined twice");
  EXPECT_EQ(ComputedError(kHead + "  aggregates:\n    - target: posts\n"
                                  "      link: {from: postId, to: key}\n      fields:\n"
                                  "        n: count\n      derived:\n        key: {sum: [n, 1]}\n"),
            "c.yaml:10: 'key' identifies the target; it cannot be derived");
  // Derived fields may read through a dotted path of a maintained field.
  EXPECT_EQ(LoadComputed(base + "      derived:\n        avg: {divide: [s, n]}\n        t: {max: [s, n, 0]}\n")
                .aggregates.at(0)
                .derived.size(),
            2u);
}

TEST(ComputedRuleLoader, TwoAggregatesOfOneTarget) {
  const std::string list = kHead + "  aggregates:\n";
  // Different fields of one target: fine.
  EXPECT_EQ(LoadComputed(list + "    - {target: posts, link: postId, fields: {n: count}}\n"
                                "    - {target: blog.posts, link: replyTo, fields: {r: count}}\n")
                .aggregates.size(),
            2u);
  // The same field of one target, whether the target is named with its database or not.
  EXPECT_EQ(ComputedError(list + "    - {target: posts, link: postId, fields: {n: count}}\n"
                                 "    - {target: blog.posts, link: replyTo, fields: {n: count}}\n"),
            "c.yaml:6: field 'n' of blog.posts is maintained by two aggregates");
  EXPECT_EQ(ComputedError(list + "    - {target: posts, link: postId, fields: {n: count, s: {sum: x}}}\n"
                                 "    - {target: posts, link: replyTo, fields: {m: count},"
                                 " derived: {s: {sum: m}}}\n"),
            "c.yaml:6: field 's' of blog.posts is maintained by two aggregates");
  // The same field name in different targets: fine.
  EXPECT_EQ(LoadComputed(list + "    - {target: posts, link: postId, fields: {n: count}}\n"
                                "    - {target: other.posts, link: postId, fields: {n: count}}\n")
                .aggregates.size(),
            2u);
}

TEST(ComputedRuleLoader, TargetWithARuleOfItsOwn) {
  TempDir dir;
  std::string comments = dir.Write("comments.yaml", kComputed);
  std::string posts = dir.Write(
      "posts.yaml", "namespace: blog.posts\npattern: computed\ncomputed:\n  fields: {t: a}\n");
  RuleLoadResult result = LoadRuleDirectory(dir.path().string());
  EXPECT_EQ(result.rules, nullptr);
  ASSERT_EQ(result.errors.size(), 1u);
  EXPECT_EQ(result.errors[0], comments + ":1: target 'blog.posts' has a rule of its own in " + posts +
                                  "; remold writes maintained fields to it directly and would "
                                  "bypass that rule, expected a plain collection");
}

TEST(ComputedRuleLoader, EveryTargetWithARuleIsReported) {
  TempDir dir;
  std::string comments = dir.Write("comments.yaml", kComputed);
  dir.Write("posts.yaml", kAttribute);  // shop.products: not a target
  std::string authors = dir.Write("authors.yaml", "namespace: people.authors\npattern: attribute\n"
                                                  "attribute:\n  except: [name]\n");
  std::string posts = dir.Write("x.yml", "namespace: blog.posts\npattern: bucket\nbucket:\n"
                                         "  collection: posts_b\n  time: at\n  span: 1h\n");
  RuleLoadResult result = LoadRuleDirectory(dir.path().string());
  EXPECT_EQ(result.rules, nullptr);
  ASSERT_EQ(result.errors.size(), 2u);
  EXPECT_EQ(result.errors[0].rfind(comments + ":1: target 'blog.posts' has a rule of its own in " +
                                       posts + ";", 0),
            0u)
      << result.errors[0];
  EXPECT_EQ(result.errors[1].rfind(comments + ":1: target 'people.authors' has a rule of its own in " +
                                       authors + ";", 0),
            0u)
      << result.errors[1];
}

TEST(ComputedRuleLoader, RulesBesideTheirTargetsLoad) {
  // A computed rule and a rule for a collection that is not its target.
  TempDir dir;
  dir.Write("comments.yaml", kComputed);
  dir.Write("readings.yaml", kValid);
  dir.Write("orders.yaml", "namespace: shop.orders\npattern: computed\ncomputed:\n"
                           "  fields:\n    total: {sum: {each: items, of: {product: [price, qty]}}}\n");
  RuleLoadResult result = LoadRuleDirectory(dir.path().string());
  ASSERT_TRUE(result.errors.empty()) << result.errors.front();
  ASSERT_TRUE(result.rules);
  EXPECT_EQ(result.rules->rules().size(), 3u);
  ASSERT_TRUE(result.rules->Find("shop", "orders"));
  EXPECT_TRUE(std::holds_alternative<ComputedRule>(result.rules->Find("shop", "orders")->pattern));
}

}  // namespace
}  // namespace remold
