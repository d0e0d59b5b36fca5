// The rewrite engine: (command, RuleSet, capabilities) -> Plan, or nothing.
//
// Pure: no I/O, no clocks, no globals. A command on a namespace without a
// rule yields nullopt, and the proxy forwards it byte for byte.
#pragma once

#include <optional>

#include "rewrite/capabilities.h"
#include "rewrite/command.h"
#include "rewrite/plan.h"
#include "rules/rule_set.h"

namespace remold {

std::optional<Plan> Rewrite(const Command& command, const RuleSet& rules, const Capabilities& caps);

}  // namespace remold
