#include "tools/common/scram_login.h"

#include <string_view>

#include "tools/common/scram.h"

namespace remold {
namespace {

Doc Binary(std::string_view bytes) {
  Doc holder;
  bson_append_binary(holder.mut(), "v", -1, BSON_SUBTYPE_BINARY, reinterpret_cast<const uint8_t*>(bytes.data()),
                     static_cast<uint32_t>(bytes.size()));
  return holder;
}

std::string PayloadOf(const Doc& reply) {
  std::optional<bson_iter_t> payload = Find(reply.get(), "payload");
  if (!payload || !BSON_ITER_HOLDS_BINARY(&*payload)) return "";
  bson_subtype_t subtype;
  uint32_t length = 0;
  const uint8_t* data = nullptr;
  bson_iter_binary(&*payload, &subtype, &length, &data);
  return std::string(reinterpret_cast<const char*>(data), length);
}

// The refusal in `reply`, if it is one.
std::optional<LoginFailure> Refusal(const Doc& reply) {
  if (FindBool(reply.get(), "ok").value_or(false)) return std::nullopt;
  const int32_t code = static_cast<int32_t>(FindInteger(reply.get(), "code").value_or(0));
  return LoginFailure{FindString(reply.get(), "errmsg").value_or("no message") + " (code " + std::to_string(code) + ")",
                      code};
}

}  // namespace

std::optional<LoginFailure> ScramLogin(const CommandRunner& run, AuthMechanism mechanism, const std::string& user,
                                       const std::string& password, const std::string& source) {
  ScramConversation scram(mechanism, user, password);
  if (!scram.problem().empty()) return LoginFailure{scram.problem()};
  Doc start, options;
  BSON_APPEND_INT32(start.mut(), "saslStart", 1);
  AppendString(start.mut(), "mechanism", MechanismName(mechanism));
  AppendValue(start.mut(), "payload", *Find(Binary(scram.ClientFirst()).get(), "v"));
  BSON_APPEND_BOOL(options.mut(), "skipEmptyExchange", true);
  AppendDoc(start.mut(), "options", options);
  Doc reply = run(source, start);
  if (std::optional<LoginFailure> refused = Refusal(reply)) return refused;
  std::string error;
  std::optional<std::string> final_message = scram.ClientFinal(PayloadOf(reply), error);
  if (!final_message) return LoginFailure{error};
  for (int step = 0; step < 3; ++step) {
    std::optional<bson_iter_t> conversation = Find(reply.get(), "conversationId");
    if (!conversation) return LoginFailure{"the server's answer has no conversationId"};
    Doc next;
    BSON_APPEND_INT32(next.mut(), "saslContinue", 1);
    AppendValue(next.mut(), "conversationId", *conversation);
    AppendValue(next.mut(), "payload", *Find(Binary(step == 0 ? *final_message : "").get(), "v"));
    reply = run(source, next);
    if (std::optional<LoginFailure> refused = Refusal(reply)) return refused;
    if (step == 0 && !scram.ServerFinalValid(PayloadOf(reply), error)) return LoginFailure{error};
    if (FindBool(reply.get(), "done").value_or(false)) return std::nullopt;
  }
  return LoginFailure{"the server did not finish the conversation"};
}

}  // namespace remold
