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

}  // namespace
}  // namespace remold
