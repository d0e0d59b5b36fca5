// The versioned pattern's view: the aggregation stages that bring every
// stored document to the current version, as Upgrade (upgrade.h) does in
// C++ (pure). One $replaceRoot per version after the first, for the
// documents at the version before it. Only operators of MongoDB 4.2 (and
// of the test backend) are used: no $let ($map over one element binds a
// variable) and no $type (rewrite/type_tests.h).
#pragma once

#include <string>
#include <vector>

#include "common/doc.h"
#include "patterns/versioned/rule.h"

namespace remold {

std::vector<Doc> UpgradeStages(const VersionedRule& rule);

// Filters (Extended JSON) on the stored version: documents at a version
// before the current one (missing and null are the first), and the others
// (current, or unknown to the rule, which reads return as stored).
std::string OlderVersionsFilter(const VersionedRule& rule);
std::string NotOlderFilter(const VersionedRule& rule);

}  // namespace remold
