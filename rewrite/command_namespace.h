// The namespace a command addresses, read from its document alone: "$db",
// and the collection its first value names (getMore: its "collection"; an
// explain: the explained command's). The one reading of it that rule
// lookup, the engine and the slow-operation log share.
//
// Pure, and cheap on the fast path: it looks at the top-level fields only,
// copies nothing but the two names, and allocates nothing for a command
// that names no collection.
#pragma once

#include <bson/bson.h>

#include <optional>
#include <string>
#include <string_view>

namespace remold {

struct CommandNamespace {
  std::string db;
  std::optional<std::string> collection;  // none: a command on the database
};

// nullopt when `body` has no "$db" string (or is not a valid document).
std::optional<CommandNamespace> ResolveNamespace(std::string_view command, const bson_t* body);

}  // namespace remold
