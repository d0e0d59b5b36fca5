// The rules remold applies, as validated, immutable values.
//
// A rule belongs to one logical namespace ("db.collection") and names its
// pattern. Rules are built only by the loader (rules/loader.h), which has
// checked every field; code that receives a Rule may rely on it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace remold {

struct Namespace {
  std::string db;
  std::string collection;

  std::string full() const { return db + "." + collection; }
  bool operator==(const Namespace&) const = default;
};

// Summaries the bucket keeps for one measurement field.
struct BucketSummary {
  std::string field;
  bool sum = false;
  bool min = false;
  bool max = false;
};

// Bucket pattern: single measurements are stored grouped in bucket
// documents, one per meta-field values and time span:
//   {<meta...>, <bucket_time>: Date, <measurements>: [{...}, ...],
//    count: N, sum: {f: ...}, min: {f: ...}, max: {f: ...}}
struct BucketRule {
  Namespace logical;
  Namespace buckets;
  std::vector<std::string> meta_fields;
  std::string time_field;
  int64_t span_ms = 3'600'000;
  std::string bucket_time_field = "start";
  std::string measurements_field = "m";
  // Fields copied into each measurement; empty: all but the meta fields.
  std::vector<std::string> measurement_fields;
  std::vector<BucketSummary> summaries;
  std::optional<int32_t> max_count;

  // Field names of the maintained summaries in a bucket document.
  static constexpr const char* kCountField = "count";
  static constexpr const char* kSumField = "sum";
  static constexpr const char* kMinField = "min";
  static constexpr const char* kMaxField = "max";
};

// Attribute pattern: sparse fields live as {k, v} pairs in one array, so
// one {array.k, array.v} index serves a query on any of them:
//   {<fixed fields...>, <array>: [{<key>: "ram_gb", <value>: 16}, ...]}
struct AttributeRule {
  Namespace logical;
  std::string array_field = "specs";
  std::string key_name = "k";
  std::string value_name = "v";
  // Which top-level fields are attributes: the listed ones, or (when
  // `fields` is empty) every field except `_id`, the array and `except`.
  std::vector<std::string> fields;
  std::vector<std::string> except;
  bool unfold = true;          // reads return the attributes as fields
  bool fix_elem_match = true;  // {"a.k": X, "a.v": P} is read as $elemMatch

  bool IsAttribute(std::string_view field) const;
};

struct Rule {
  std::string name;    // the rule file's stem, for messages and metrics
  std::string source;  // the rule file's path
  std::variant<BucketRule, AttributeRule> pattern;

  const Namespace& logical() const {
    return std::visit([](const auto& p) -> const Namespace& { return p.logical; }, pattern);
  }
};

}  // namespace remold
