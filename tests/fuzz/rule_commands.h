// The fixed client commands fuzz_rules sends to every rule it loads, on the
// rule's collection and on each collection it watches: a find, an insert,
// an update, a delete, an aggregate and a findAndModify, each a valid BSON
// command document with "$db". The collection and database names are the
// rule's, whatever bytes they hold.
#pragma once

#include <vector>

#include "common/doc.h"
#include "rules/namespace.h"

namespace remold::fuzz {

std::vector<Doc> CommandsOn(const Namespace& ns);

}  // namespace remold::fuzz
