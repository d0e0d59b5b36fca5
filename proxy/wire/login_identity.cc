#include "proxy/wire/login_identity.h"

#include <bson/bson.h>

#include <string_view>

namespace remold::wire {
namespace {

// authzid and user of a SCRAM client-first message:
// gs2-header ("n," / "y," / "p=...,", then "a=authzid," or ",") followed
// by "n=user,r=nonce...".
std::optional<std::string> ScramUser(std::string_view message) {
  const size_t first_comma = message.find(',');
  if (first_comma == std::string_view::npos) return std::nullopt;
  const size_t second_comma = message.find(',', first_comma + 1);
  if (second_comma == std::string_view::npos) return std::nullopt;
  const std::string_view authzid = message.substr(first_comma + 1, second_comma - first_comma - 1);
  std::string_view bare = message.substr(second_comma + 1);
  if (!bare.starts_with("n=")) return std::nullopt;
  bare.remove_prefix(2);
  const std::string_view user = bare.substr(0, bare.find(','));
  if (user.empty()) return std::nullopt;
  return std::string(authzid) + '\0' + std::string(user);
}

// authzid and authcid of a PLAIN message: authzid NUL authcid NUL password.
std::optional<std::string> PlainUser(std::string_view message) {
  const size_t first = message.find('\0');
  if (first == std::string_view::npos) return std::nullopt;
  const size_t second = message.find('\0', first + 1);
  if (second == std::string_view::npos || second == first + 1) return std::nullopt;
  return std::string(message.substr(0, second));
}

}  // namespace

std::optional<std::string> LoginIdentity(std::span<const uint8_t> command) {
  bson_t document;
  bson_iter_t iter;
  if (command.empty() || !bson_init_static(&document, command.data(), command.size()) ||
      !bson_iter_init(&iter, &document) || !bson_iter_next(&iter))
    return std::nullopt;
  const std::string_view name = bson_iter_key(&iter);
  if (name != "saslStart" && name != "authenticate") return std::nullopt;
  std::string_view db, mechanism, user;
  std::string_view payload;
  while (bson_iter_next(&iter)) {
    const std::string_view key = bson_iter_key(&iter);
    uint32_t length = 0;
    if (key == "$db" && BSON_ITER_HOLDS_UTF8(&iter)) {
      const char* text = bson_iter_utf8(&iter, &length);
      db = {text, length};
    } else if (key == "mechanism" && BSON_ITER_HOLDS_UTF8(&iter)) {
      const char* text = bson_iter_utf8(&iter, &length);
      mechanism = {text, length};
    } else if (key == "user" && BSON_ITER_HOLDS_UTF8(&iter)) {
      const char* text = bson_iter_utf8(&iter, &length);
      user = {text, length};
    } else if (key == "payload" && BSON_ITER_HOLDS_BINARY(&iter)) {
      const uint8_t* data = nullptr;
      bson_subtype_t subtype;
      bson_iter_binary(&iter, &subtype, &length, &data);
      payload = {reinterpret_cast<const char*>(data), length};
    } else if (key == "payload" && BSON_ITER_HOLDS_UTF8(&iter)) {  // some drivers send a string
      const char* text = bson_iter_utf8(&iter, &length);
      payload = {text, length};
    }
  }
  if (db.empty() || mechanism.empty()) return std::nullopt;
  std::optional<std::string> who;
  if (name == "authenticate") {
    if (!user.empty()) who = std::string(user);
  } else if (mechanism == "SCRAM-SHA-1" || mechanism == "SCRAM-SHA-256") {
    who = ScramUser(payload);
  } else if (mechanism == "PLAIN") {
    who = PlainUser(payload);
  }
  if (!who) return std::nullopt;
  return std::string(db) + '\0' + std::string(mechanism) + '\0' + *who;
}

bool ConversationDone(std::span<const uint8_t> reply) {
  bson_t document;
  bson_iter_t iter;
  return !reply.empty() && bson_init_static(&document, reply.data(), reply.size()) &&
         bson_iter_init_find(&iter, &document, "done") && bson_iter_as_bool(&iter);
}

}  // namespace remold::wire
