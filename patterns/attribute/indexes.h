// createIndexes on an attribute collection. An attribute is never a stored
// field, so an index on it as written would be built and never used (and a
// unique one would enforce nothing). A plain ascending or descending index
// on one attribute is served by the pair index {array.k: 1, array.v: 1},
// which remold ensures: the reply says so in `note`. What the pair index
// cannot honour (unique, sparse, partial, TTL, collation, hidden, a
// compound key with an attribute, a text/2d/hashed key on an attribute) is
// refused with InvalidOptions (72) before anything is built. Indexes on
// fixed fields only are forwarded as they are; a command that mixes both
// kinds is refused, naming the attribute.
#pragma once

#include <optional>

#include "patterns/attribute/rule.h"
#include "rewrite/command.h"
#include "rewrite/plan.h"
#include "rules/rule_context.h"

namespace remold {

// nullopt: no index of the command names an attribute (forward it).
std::optional<Plan> AttributeCreateIndexes(const Command& command, const RuleContext& rule,
                                           const AttributeRule& attribute);

}  // namespace remold
