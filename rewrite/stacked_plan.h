// StackedPlan: the plan of a rule stack (`pattern: [upper, lower]`), made
// of the upper rule's plan and the lower rule's rewrite.
//
// The upper rule rewrites the client's command as if its collection were
// plain; each backend command of that plan is then what the lower rule
// sees from a client: it is rewritten by `lower` (nullopt: sent as it is),
// that plan runs to its end, and its shaped reply is the reply the upper
// plan receives for the command. So the upper plan sees the documents the
// application wrote through the lower rule, and the lower rule stores
// whatever the upper plan writes.
//
// Both plans run by the rules of rewrite/plan_runner.h: a refusal or a
// backend error ends the lower plan and becomes the reply the upper plan
// receives, which ends it too unless its command may fail. Backend cursors
// to kill and warnings of every lower plan join the upper plan's.
//
// The lower plan's prerequisites (Plan::ensure) known when the stacked
// plan is built are its ensure; those of later lower plans, when not
// among them, run before their plan (their failure is ignored).
//
// A stacked plan holds the state of its run: run it once.
#pragma once

#include <functional>
#include <optional>

#include "rewrite/command.h"
#include "rewrite/plan.h"

namespace remold {

using LowerRewrite = std::function<std::optional<Plan>(const Command&)>;

Plan StackedPlan(Plan upper, LowerRewrite lower);

}  // namespace remold
