// Documents written to a collection before its rule, still in the form the
// rule's reads do not see (a bucket rule's flat readings, an attribute
// rule's plain attribute fields, a computed rule's targets without their
// values): found with each pattern's Unconverted() filter or its
// UnconvertedPipelines (patterns/adoption.h), so that remold never answers
// from half the data without saying so. `remold serve` counts them at
// start, and for each rule a reload adds or changes, and decides from the
// counts how the rules serve (app/adoption.h); `remold check DIR --backend
// URI` prints them and exits 1.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/doc.h"
#include "rules/namespace.h"
#include "ruleset/rule_set.h"

namespace remold {

struct UnconvertedProbe {
  std::string rule;
  std::string pattern;
  size_t layer = 0;        // of the rule, from the top (Rule::layers)
  std::string layer_key;   // the layer and its form (LayerKey)
  std::string migration;   // the _id of its migration's checkpoint: the rule, or "<rule>/<pattern>" in a stack
  Namespace ns;            // where `stages` run: the rule's collection
  std::vector<Doc> stages; // each output document one thing not in the rule's form;
                           // empty: the backend cannot count them
  std::string what = "document(s)";
  std::string state;        // "written before the rule are not in its form", or where a migration stands
  std::string consequence;  // what the rule does with them, and what ends it
  // The layer's adoption is automatic (patterns/adoption.h): this count
  // decides whether it serves as while unconverted.
  bool decides = false;
};

// Counts stop here: the question is whether, not exactly how many.
inline constexpr int64_t kUnconvertedCountLimit = 1'000'000;

// What identifies one layer of a rule and the form it stores: a layer
// whose key is unchanged by a reload has been counted already.
std::string LayerKey(const Rule& rule, size_t layer);

// The probes of every rule that has a form to find; with `before`, only
// for the layers that are new or changed since. A rule that is migrating
// (patterns/migration.h) reads both forms: its probe counts the documents
// the migration has left, in the direction it goes.
std::vector<UnconvertedProbe> UnconvertedProbes(const RuleSet& rules, const RuleSet* before = nullptr);

// "rule 'readings' (bucket, iot.readings): 60 document(s) written before
// the rule are not in its form: <consequence>" (`what`, `state`, then
// `consequence`).
std::string DescribeUnconverted(const UnconvertedProbe& probe, int64_t count);

}  // namespace remold
