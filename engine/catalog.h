// listCollections as the application sees its database: a ruled collection
// whose documents are stored in another collection (a bucket rule's logical
// collection) does not exist on the backend as such, yet the application
// created it and writes to it. Its entry is listed like a collection's,
// built from the entry of the collection that stores it (same type, options
// and info), under the logical name, when that collection exists.
//
// The client's filter is applied to the entry when it names only `name` (a
// string, {$eq}, {$in} of strings) and `type`; any other filter lists only
// what the backend has. The stored collection stays listed: it is an
// ordinary collection.
//
// Pure, golden-tested.
#pragma once

#include <optional>

#include "rewrite/command.h"
#include "rewrite/plan.h"
#include "ruleset/rule_set.h"

namespace remold {

// nullopt when no rule of the command's database stores its documents
// elsewhere: the command is forwarded unchanged.
std::optional<Plan> ListCollectionsPlan(const Command& command, const RuleSet& rules);

}  // namespace remold
