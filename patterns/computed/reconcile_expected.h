// What the source data says computed and maintained fields should hold:
// the aggregation pipelines that recount the sources of an aggregate, and
// the expectations (patterns/reconcile/drift.h) for one document.
//
// Maintained fields (patterns/computed/rule.h, MaintainedField), for a target whose
// link value has sources:
//   count, sum   the $sum of the group; min, max: its $min/$max (absent
//                when no source has a value); latest: `of` of a source
//                with the greatest `by` (several acceptable on a tie)
// and for a target nothing links to: count and sum 0 or missing, the
// others absent. Derived fields are their expressions evaluated over the
// expected maintained values; same-document computed fields, over the
// document itself.
//
// Pure: no I/O.
#pragma once

#include <bson/bson.h>

#include <map>
#include <string>
#include <vector>

#include "common/doc.h"
#include "patterns/computed/rule.h"
#include "patterns/reconcile/drift.h"
#include "patterns/reconcile/value.h"

namespace remold {

// The $group result for one link value: maintained field -> value.
struct LinkSources {
  Value link;
  Doc values;
  bool seen = false;  // a target with this link value was found
};

// For `latest` fields with ties: field -> the acceptable values.
using LatestChoices = std::map<std::string, std::vector<Value>>;

// {<field>: {$in: links}}; when `links` is null, every document linking
// somewhere: {<field>: {$exists: true, $ne: null}}.
Doc LinkFilter(const std::string& field, const std::vector<Value>* links);

// [$match, $group] counting count/sum/min/max fields per link value.
Doc GroupPipeline(const ComputedAggregate& aggregate, const std::vector<Value>* links);

// The distinct `by` fields of the aggregate's latest fields.
std::vector<std::string> LatestOrders(const ComputedAggregate& aggregate);

// [$match, $sort {by: -1}, $group {$first}] for the latest fields ordered by `by`.
Doc LatestPipeline(const ComputedAggregate& aggregate, const std::string& by, const std::vector<Value>* links);

// The $group output document without its _id, appended to `values`.
void AppendGroupValues(Doc& values, const bson_t* group_result);

// Expectations for a target document (`target` may be empty: a missing
// target); `sources` null: nothing links to it.
std::vector<Expectation> AggregateExpectations(const ComputedAggregate& aggregate, const LinkSources* sources,
                                               const LatestChoices* ties, const bson_t* target);

// Expectations of same-document computed fields.
std::vector<Expectation> FieldExpectations(const std::vector<ComputedField>& fields, const bson_t* document);

// Adds, for the source `source` of a link whose group values are `values`,
// its `of` to the acceptable latest values when its `by` is the maximum.
void CollectLatestChoice(const ComputedAggregate& aggregate, const bson_t* values, const bson_t* source,
                         LatestChoices& choices);

}  // namespace remold
