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
  // The string the command's first value holds (getMore: "collection"),
  // for any command but those known to name something else (createUser...):
  // rule lookup takes it, so that an unknown command on a ruled collection
  // reaches the rule (which refuses it) rather than the stored form.
  std::optional<std::string> collection;
  // True when the command is one known to name a collection there. An
  // unknown command's first string may be anything, data included: the
  // slow-operation log names the collection only when this is set.
  bool known = false;
};

// nullopt when `body` has no "$db" string (or is not a valid document).
std::optional<CommandNamespace> ResolveNamespace(std::string_view command, const bson_t* body);

// Whether `command` names its collection in its first value, in "$db"
// (find, insert, update, delete, count...; not getMore, explain, or
// dataSize's "db.collection"): that value alone tells which collection
// it addresses, whatever else the document holds.
bool NamesCollectionFirst(std::string_view command);

}  // namespace remold
