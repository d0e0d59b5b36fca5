#include "rewrite/command_namespace.h"

#include <array>

#include "common/bson_walk.h"

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

// The strings at `keys` in `body`'s top level (the first element with each
// key; nullopt when absent or not a string), from one walk: this runs for
// every command while rules are loaded, and a libbson iterator per key cost
// several times as much (measured with callgrind).
template <size_t N>
std::array<std::optional<std::string_view>, N> StringsAt(const bson_t* body,
                                                         const std::array<std::string_view, N>& keys) {
  std::array<std::optional<std::string_view>, N> found;
  std::array<bool, N> seen{};
  size_t left = N;
  WalkTopLevel({bson_get_data(body), body->len}, [&](const BsonElement& element) {
    for (size_t i = 0; i < N; ++i) {
      if (seen[i] || element.key != keys[i]) continue;
      seen[i] = true;
      --left;
      if (element.type == BSON_TYPE_UTF8 && element.value.size() >= 5)  // int32 size, bytes, NUL
        found[i].emplace(reinterpret_cast<const char*>(element.value.data()) + 4, element.value.size() - 5);
    }
    return left > 0;
  });
  return found;
}

std::optional<std::string> Copied(std::optional<std::string_view> value) {
  if (!value) return std::nullopt;
  return std::string(*value);
}

// The collection `command` names in `body` (a command document), and
// whether the command is known to name one there. `named` is the string
// at `command` and `collection` the one at "collection".
void ReadCollection(std::string_view command, const bson_t* body, std::optional<std::string_view> named,
                    std::optional<std::string_view> collection, CommandNamespace& out) {
  if (command == "getMore") {
    out.collection = Copied(collection);
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
    if (name == "explain") return;
    const auto [inner_named, inner_collection] = StringsAt<2>(&explained, {name, "collection"});
    ReadCollection(name, &explained, inner_named, inner_collection, out);
    return;
  }
  out.known = Contains(kCollectionCommands, command);  // the common case, first
  if (!out.known && Contains(kNotACollection, command)) return;
  out.collection = Copied(named);
}

}  // namespace

bool NamesCollectionFirst(std::string_view command) {
  return command != "dataSize" && Contains(kCollectionCommands, command);
}

std::optional<CommandNamespace> ResolveNamespace(std::string_view command, const bson_t* body) {
  const auto [db, named, collection] = StringsAt<3>(body, {"$db", command, "collection"});
  if (!db) return std::nullopt;
  CommandNamespace ns{std::string(*db), std::nullopt, false};
  ReadCollection(command, body, named, collection, ns);
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
