// The rules remold applies, as validated, immutable values.
//
// A rule belongs to one logical namespace ("db.collection") and names its
// pattern. Rules are built only by the loader (rules/loader.h), which has
// checked every field; code that receives a Rule may rely on it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
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

struct Rule {
  std::string name;    // the rule file's stem, for messages and metrics
  std::string source;  // the rule file's path
  std::variant<BucketRule> pattern;

  const Namespace& logical() const {
    return std::visit([](const auto& p) -> const Namespace& { return p.logical; }, pattern);
  }
};

}  // namespace remold
