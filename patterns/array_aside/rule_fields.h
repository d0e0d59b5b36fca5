// The fields every rule of an array stored aside (layout.h) parses alike:
// the array, a bounded count, the aside collection, and `migrating:
// to_flat`. Each reports through `ctx` (rules/file_context.h) and fails
// the current step on a bad value; `section` is the rule's own mapping,
// `where` its name as messages quote it ("'outlier'").
#pragma once

#include <cstdint>
#include <string>

#include "rules/namespace.h"

namespace YAML {
class Node;
}

namespace remold {

class FileContext;

// `array:`, a top-level field other than _id and remold's own; `what` says
// what its elements are for ("the top-level array field whose ...").
std::string ParseAsideArray(const FileContext& ctx, const YAML::Node& section, const std::string& where,
                            const std::string& what);

// `key:`, required, an integer from `min` to `max`; `what` says what it
// counts ("how many elements a document keeps").
int32_t ParseAsideCount(const FileContext& ctx, const YAML::Node& section, const std::string& where,
                        const std::string& key, int32_t min, int32_t max, const std::string& what);

// `key:`, the collection beside `logical` the rest goes to; by default
// <logical collection>_<suffix>. `role` names it in messages ("overflow").
Namespace ParseAsideCollection(const FileContext& ctx, const YAML::Node& section, const std::string& key,
                               const Namespace& logical, const std::string& suffix, const std::string& role);

// `migrating:`, absent (false) or to_flat (true).
bool ParseMigratingToFlat(const FileContext& ctx, const YAML::Node& section);

}  // namespace remold
