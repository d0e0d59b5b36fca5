// The rewrite engine: (command, RuleSet, capabilities) -> Plan, or nothing.
//
// Pure: no I/O, no clocks, no globals. A command that concerns no rule yields
// nullopt, and the proxy forwards it byte for byte. A command concerns a
// rule when it addresses the rule's collection, or reaches it from
// elsewhere (engine/indirect_references.h), or lists it (listCollections,
// engine/catalog.h).
#pragma once

#include <optional>
#include <string_view>

#include "rewrite/capabilities.h"
#include "rewrite/command.h"
#include "rewrite/plan.h"
#include "ruleset/rule_set.h"

namespace remold {

std::optional<Plan> Rewrite(const Command& command, const RuleSet& rules, const Capabilities& caps);

// Whether a command of this name may concern a rule without addressing its
// collection (an aggregate's $lookup, a rename, listCollections; for an
// explain, the explained command). The proxy hands the engine only these,
// and commands on ruled collections.
bool MayConcernRulesElsewhere(std::string_view command);

}  // namespace remold
