// Documents written to a collection before its rule, still in the form the
// rule's reads do not see (a bucket rule's flat readings, an attribute
// rule's plain attribute fields): found with each pattern's Unconverted()
// filter, so that remold never answers from half the data without saying
// so. `remold serve` counts them at start, and for each rule a reload adds
// or changes, and logs a warning per rule;
// `remold check DIR --backend URI` prints them and exits 1.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/doc.h"
#include "rules/namespace.h"
#include "rules/rule_set.h"

namespace remold {

struct UnconvertedProbe {
  std::string rule;
  std::string pattern;
  Namespace logical;
  Doc filter;               // on `logical`
  std::string state;        // "written before the rule are not in its form", or where a migration stands
  std::string consequence;  // what the rule's reads do with those documents
};

// Counts stop here: the question is whether, not exactly how many.
inline constexpr int64_t kUnconvertedCountLimit = 1'000'000;

// One probe per rule that has a form to find; with `before`, only for the
// rules that are new or changed since (a rule kept as it was has been
// reported already). A rule that is migrating (patterns/migration.h) reads
// both forms: its probe counts the documents the migration has left, in
// the direction it goes.
std::vector<UnconvertedProbe> UnconvertedProbes(const RuleSet& rules, const RuleSet* before = nullptr);

// "rule 'readings' (bucket, iot.readings): 60 document(s) written before
// the rule are not in its form: <consequence>" (`state`, then `consequence`).
std::string DescribeUnconverted(const UnconvertedProbe& probe, int64_t count);

}  // namespace remold
