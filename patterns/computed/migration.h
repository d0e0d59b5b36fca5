// The computed pattern's migration part (patterns/migration.h,
// ValueMigration): its form moves no document, so a migration fills the
// values it maintains.
#pragma once

#include <string>
#include <vector>

#include "patterns/adoption.h"
#include "patterns/computed/rule.h"
#include "patterns/migration.h"

namespace remold {

// The rule says `migrating: true`: writes recompute the targets they touch.
inline bool FillsValuesOnWrite(const ComputedRule& rule) { return rule.migrating; }

// The adoption part of the pattern (patterns/adoption.h). What is not in
// the rule's form is a target that sources link to and that holds no
// values yet (data written before the rule). Meanwhile each write
// recomputes the values of the targets it touches, as `migrating: true`
// does; a rule with `latest` fields cannot, and refuses writes to its
// source instead. A rule of same-document fields alone has nothing to
// adopt. Values that a target holds but that are wrong (maintained
// otherwise before the rule) are not found here: `remold reconcile` finds
// them.
inline Adoption AdoptionOf(const ComputedRule& rule) {
  return rule.aggregates.empty() ? Adoption::kOff : rule.adoption;
}
ComputedRule WhileUnconverted(const ComputedRule& rule);
std::string ServingWhileUnconverted(const ComputedRule& rule, const std::string& migrate);
// One pipeline per aggregate on the source collection: the link values of
// targets without their values (a target of another database cannot be
// reached from the source by $lookup: its pipeline has no stages, and it
// cannot be counted).
std::vector<UnconvertedPipeline> UnconvertedPipelines(const ComputedRule& rule);

}  // namespace remold
