// `remold migrate` for a rule whose form spans two collections document by
// document (patterns/migration.h, PlanMigration: an outlier rule's pages):
// round after round, the documents still in the direction's source form
// are counted, and the rule's own round plan stores a batch of them in the
// other form, under the guards of the rule's writes (a document changed
// meanwhile is left for the next round). Nothing is written with a dry
// run: the count is reported. Without a checkpoint of position: a run
// killed at any point starts over from the count, which only costs time.
// --batch and --max-rate do not apply: the plan's batch is the rule's.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "rewrite/plan.h"
#include "tools/migrate/migration_request.h"

namespace remold {

// `source`: the filter (Extended JSON) of the documents left; `round`: one
// round's plan. Exit status 0 none left, 1 some left; throws UsageError or
// BackendError.
int MigrateByPlans(const MigrationRequest& request, std::string_view pattern, const std::string& source,
                   const std::function<Plan()>& round);

}  // namespace remold
