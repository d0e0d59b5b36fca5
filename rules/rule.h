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

// An expression of a computed field, over one document (see README,
// "Computed fields"). A field path names a field of the document, or of
// the array element inside `each`.
struct Expression {
  enum class Kind {
    kField,    // the value at `path`
    kLiteral,  // `literal`
    kSum,      // numbers among the operands added; others ignored ($sum)
    kProduct,  // operands multiplied; null if any is null or missing ($multiply)
    kDivide,   // operands[0] / operands[1]; null if either is null or the divisor 0
    kCount,    // the number of elements of the array at `path`; 0 if missing
    kMin,      // the least non-null operand ($min)
    kMax,      // the greatest non-null operand ($max)
    kConcat,   // strings joined; null if any is null or missing ($concat)
    kEach,     // operands[0] evaluated on each element of the array at `path`
  };
  using Literal = std::variant<std::monostate, bool, int64_t, double, std::string>;

  Kind kind = Kind::kLiteral;
  std::string path;
  Literal literal;
  std::vector<Expression> operands;
};

// A field whose value is an expression over other fields of the same
// document.
struct ComputedField {
  std::string field;
  Expression expression;
  // Top-level fields of the document the expression reads.
  std::vector<std::string> inputs;
};

// A value of a target document maintained from the source documents that
// link to it.
struct MaintainedField {
  enum class Op { kCount, kSum, kMin, kMax, kLatest };
  std::string field;  // in the target
  Op op = Op::kCount;
  std::string of;     // kSum, kMin, kMax, kLatest: the source field
  std::string by;     // kLatest: the source field that orders "latest"
  std::string by_field;  // kLatest: the target's kMax field of `by`
};

// Source documents (the rule's namespace) linked to one target document
// each: source.<link_from> == target.<link_to>.
struct ComputedAggregate {
  Namespace target;
  std::string link_from;
  std::string link_to = "_id";
  bool create_target = false;  // upsert a missing target, or leave it alone
  std::vector<MaintainedField> fields;
  // Fields of the target computed from its maintained fields (an average).
  std::vector<ComputedField> derived;
  // Top-level source fields the maintained values read, the link first.
  std::vector<std::string> inputs;
};

// Computed pattern: values derived on write, never on read.
//   aggregates: maintained fields of other collections' documents;
//   fields: fields of this collection's documents computed from their
//           other fields.
struct ComputedRule {
  enum class ClientWrite { kReject, kOverwrite };
  Namespace logical;
  std::vector<ComputedAggregate> aggregates;
  std::vector<ComputedField> fields;
  // What a client write of a computed field gets.
  ClientWrite on_client_write = ClientWrite::kReject;
};

struct Rule {
  std::string name;    // the rule file's stem, for messages and metrics
  std::string source;  // the rule file's path
  std::variant<BucketRule, AttributeRule, ComputedRule> pattern;

  const Namespace& logical() const {
    return std::visit([](const auto& p) -> const Namespace& { return p.logical; }, pattern);
  }
};

}  // namespace remold
