#include "rewrite/command_namespace.h"

#include <array>

namespace remold {
namespace {

// Commands whose first value is a string that names no collection.
constexpr std::array<std::string_view, 12> kNotACollection = {
    "createUser",       "updateUser",          "dropUser",  "grantRolesToUser",
    "revokeRolesFromUser", "createRole",       "updateRole", "dropRole",
    "grantRolesToRole", "revokeRolesFromRole", "renameCollection", "usersInfo"};

// Commands whose first value names a collection (getMore and explain
// are read apart).
constexpr std::array<std::string_view, 24> kCollectionCommands = {
    "find",       "insert",        "update",      "delete",      "findAndModify",
    "findandmodify", "aggregate",  "count",       "distinct",    "mapReduce",
    "create",     "drop",          "createIndexes", "dropIndexes", "listIndexes",
    "collMod",    "collStats",     "validate",    "killCursors", "compact",
    "reIndex",    "convertToCapped", "cloneCollectionAsCapped", "dataSize"};

template <size_t N>
bool Contains(const std::array<std::string_view, N>& names, std::string_view command) {
  for (std::string_view name : names)
    if (name == command) return true;
  return false;
}

std::optional<std::string> StringAt(const bson_t* doc, std::string_view key) {
  bson_iter_t it;
  if (!bson_iter_init_find_w_len(&it, doc, key.data(), static_cast<int>(key.size())) ||
      !BSON_ITER_HOLDS_UTF8(&it))
    return std::nullopt;
  uint32_t length = 0;
  const char* value = bson_iter_utf8(&it, &length);
  return std::string(value, length);
}

// The collection `command` names in `body` (a command document), and
// whether the command is known to name one there.
void ReadCollection(std::string_view command, const bson_t* body, CommandNamespace& out) {
  if (command == "getMore") {
    out.collection = StringAt(body, "collection");
    out.known = true;
    return;
  }
  if (command == "explain") {
    bson_iter_t it, inner;
    if (!bson_iter_init_find(&it, body, "explain") || !BSON_ITER_HOLDS_DOCUMENT(&it)) return;
    uint32_t length = 0;
    const uint8_t* data = nullptr;
    bson_iter_document(&it, &length, &data);
    bson_t explained;
    if (!bson_init_static(&explained, data, length) || !bson_iter_init(&inner, &explained) ||
        !bson_iter_next(&inner))
      return;
    std::string_view name = bson_iter_key(&inner);
    if (name != "explain") ReadCollection(name, &explained, out);
    return;
  }
  if (Contains(kNotACollection, command)) return;
  out.collection = StringAt(body, command);
  out.known = Contains(kCollectionCommands, command);
}

}  // namespace

std::optional<CommandNamespace> ResolveNamespace(std::string_view command, const bson_t* body) {
  std::optional<std::string> db = StringAt(body, "$db");
  if (!db) return std::nullopt;
  CommandNamespace ns{std::move(*db), std::nullopt, false};
  ReadCollection(command, body, ns);
  if (command == "dataSize" && ns.collection) {
    // {dataSize: "db.collection"}: a full namespace, not a name in $db.
    const size_t dot = ns.collection->find('.');
    if (dot == std::string::npos) {
      ns.collection.reset();
    } else {
      ns.db = ns.collection->substr(0, dot);
      ns.collection = ns.collection->substr(dot + 1);
    }
  }
  if (!ns.collection) ns.known = false;
  return ns;
}

}  // namespace remold
