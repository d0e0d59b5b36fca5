#include "rewrite/command_namespace.h"

#include <array>

namespace remold {
namespace {

// Commands whose first value is a string that names no collection.
constexpr std::array<std::string_view, 12> kNotACollection = {
    "createUser",       "updateUser",          "dropUser",  "grantRolesToUser",
    "revokeRolesFromUser", "createRole",       "updateRole", "dropRole",
    "grantRolesToRole", "revokeRolesFromRole", "renameCollection", "usersInfo"};

bool NamesNoCollection(std::string_view command) {
  for (std::string_view name : kNotACollection)
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

// The collection `command` names in `body` (a command document).
std::optional<std::string> CollectionOf(std::string_view command, const bson_t* body) {
  if (command == "getMore") return StringAt(body, "collection");
  if (command == "explain") {
    bson_iter_t it, inner;
    if (!bson_iter_init_find(&it, body, "explain") || !BSON_ITER_HOLDS_DOCUMENT(&it)) return std::nullopt;
    uint32_t length = 0;
    const uint8_t* data = nullptr;
    bson_iter_document(&it, &length, &data);
    bson_t explained;
    if (!bson_init_static(&explained, data, length) || !bson_iter_init(&inner, &explained) ||
        !bson_iter_next(&inner))
      return std::nullopt;
    std::string_view name = bson_iter_key(&inner);
    if (name == "explain") return std::nullopt;
    return CollectionOf(name, &explained);
  }
  if (NamesNoCollection(command)) return std::nullopt;
  return StringAt(body, command);
}

}  // namespace

std::optional<CommandNamespace> ResolveNamespace(std::string_view command, const bson_t* body) {
  std::optional<std::string> db = StringAt(body, "$db");
  if (!db) return std::nullopt;
  return CommandNamespace{std::move(*db), CollectionOf(command, body)};
}

}  // namespace remold
