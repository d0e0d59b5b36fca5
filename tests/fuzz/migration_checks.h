// The checks fuzz_rules makes of a loaded rule's migration part
// (patterns/migration.h, what `remold migrate` runs), in both directions:
// every filter and sort it states is Extended JSON, and the documents it
// makes of a fixed flat document, or of a fixed batch, are valid BSON.
#pragma once

#include "ruleset/rule.h"

namespace remold::fuzz {

void CheckMigrations(const Rule& rule);

}  // namespace remold::fuzz
