// The bucket pattern's rule: readings inserted one per document are stored
// grouped per meta values and time span, with summaries (see
// patterns/pattern.h for what every pattern's rule provides).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "patterns/adoption_mode.h"
#include "rules/namespace.h"
#include "rules/namespace_forms.h"
#include "rules/written_namespace.h"

namespace YAML {
class Node;
}

namespace remold {

class FileContext;

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
  // With `fields`, a reading holding another field is refused (a write
  // error naming it) unless `extra_fields: drop` says to drop such fields.
  bool drop_extra_fields = false;
  std::vector<BucketSummary> summaries;
  std::optional<int32_t> max_count;
  // A bucket takes readings while their bytes (kBytesField) stay within
  // this; a reading larger than it gets a bucket of its own.
  int32_t max_bytes = kDefaultMaxBytes;
  // Whether the rule file said `migrating: false` (patterns/adoption.h).
  Adoption adoption = Adoption::kAuto;
  // Set while the logical collection still holds readings written before
  // the rule (or before remold has counted them): reads, and deletes,
  // would miss them, and are refused until `remold migrate` has moved them.
  bool flat_readings_left = false;
  static constexpr int32_t kDefaultMaxBytes = 125 * 1024;  // MongoDB's time-series default
  static constexpr int32_t kMaxMaxBytes = 8 * 1024 * 1024;  // far below the 16 MiB document limit

  static constexpr std::string_view kName = "bucket";
  // Parses the rule file's `bucket:` section (a mapping).
  static BucketRule Parse(const FileContext& ctx, const YAML::Node& section,
                          const Namespace& logical);
  // The bucket collection.
  std::vector<WrittenNamespace> Writes() const;
  // "db.coll -> db.buckets", for `remold check`.
  std::string Describe() const;
  // What becomes of the stored data when a running proxy drops the rule,
  // and of data written before when it gains the rule (one sentence each,
  // for the reload's warning).
  std::string OnRemoval() const;
  std::string OnAddition() const;
  // How it stores the documents of its collections, as it serves now
  // (patterns/pattern.h, "Sidecars").
  std::vector<NamespaceForms> Forms() const;
  // Documents of `logical` still in the form written before the rule, as
  // a filter (Extended JSON); "" when there is no such form.
  std::string Unconverted() const;

  // Field names of the maintained summaries in a bucket document.
  static constexpr const char* kCountField = "count";
  static constexpr const char* kSumField = "sum";
  static constexpr const char* kMinField = "min";
  static constexpr const char* kMaxField = "max";
  static constexpr const char* kBytesField = "bytes";  // the readings' BSON bytes, maintained
};

}  // namespace remold
