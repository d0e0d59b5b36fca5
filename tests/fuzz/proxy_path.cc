#include "tests/fuzz/proxy_path.h"

#include <bson/bson.h>

#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "proxy/rewrite_bridge.h"
#include "proxy/wire/bson_check.h"
#include "proxy/wire/op_msg.h"
#include "proxy/wire/request.h"
#include "rewrite/plan_runner.h"
#include "tests/fuzz/fuzz_failure.h"
#include "tests/fuzz/plan_checks.h"

namespace remold::fuzz {
namespace {

// The field a driver sends as a document sequence for this command, or null.
const char* SequenceField(std::string_view command) {
  if (command == "insert") return "documents";
  if (command == "update") return "updates";
  if (command == "delete") return "deletes";
  return nullptr;
}

// The OP_MSG a driver sends for `client`.
std::vector<uint8_t> ClientMessage(const ClientCommand& client) {
  constexpr int32_t kRequestId = 7;
  const char* field = nullptr;
  bson_t body;
  if (client.as_sequence && !wire::ValidateDocument(client.body) &&
      bson_init_static(&body, client.body.data(), client.body.size()))
    field = SequenceField(wire::FirstKey(client.body));
  std::optional<bson_iter_t> array = field ? Find(&body, field) : std::nullopt;
  if (!array || !BSON_ITER_HOLDS_ARRAY(&*array))
    return wire::EncodeOpMsg(kRequestId, 0, 0, client.body);

  bool all_documents = true;
  ForEachChild(*array, [&](std::string_view, const bson_iter_t& item) {
    all_documents = all_documents && BSON_ITER_HOLDS_DOCUMENT(&item);
  });
  if (!all_documents) return wire::EncodeOpMsg(kRequestId, 0, 0, client.body);
  std::vector<std::span<const uint8_t>> documents = ArrayDocumentViews(*array);
  Doc rest;
  bson_copy_to_excluding_noinit(&body, rest.mut(), field, nullptr);
  return wire::EncodeOpMsgWithSequence(kRequestId, 0, rest.bytes(), field, documents);
}

}  // namespace

Outcome RunAsProxy(const ClientCommand& client, const RuleSet& rules, const Capabilities& caps,
                   ReplyFeed& replies) {
  std::vector<uint8_t> message = ClientMessage(client);
  wire::Request request;
  if (wire::DecodeRequest(message, request)) return Outcome::kRefusedByCodec;
  std::optional<Command> command = CommandForRules(request, rules);
  if (!command) return Outcome::kForwarded;
  replies.Show("client command", command->body);
  std::optional<Plan> plan = Rewrite(*command, rules, caps);
  if (!plan) return Outcome::kForwarded;

  Require(!plan->rule.empty(), "a plan that names no rule");
  if (plan->immediate_reply) {
    Require(plan->ensure.empty() && plan->commands.empty(), "an immediate reply with backend commands");
    replies.Show("immediate reply", *plan->immediate_reply);
    CheckImmediateReply(*plan->immediate_reply, *command);
    return Outcome::kImmediateReply;
  }
  Require(static_cast<bool>(plan->shape), "a plan with backend commands but no shape");
  for (const BackendCommand& ensure : plan->ensure) CheckBackendCommand(ensure);

  PlanRunner runner(std::move(*plan));
  size_t sent = 0;
  while (const BackendCommand* next = runner.Next()) {
    Require(++sent <= kMaxCommands, "a plan that does not end");
    CheckBackendCommand(*next);
    runner.Accept(replies.Next(*next));
  }
  ShapedReply shaped = runner.Finish();
  replies.Show("client reply", shaped.reply);
  // The client's reply may be a backend's, as it is or reshaped: it has
  // "ok" when theirs had.
  CheckClientReply(shaped.reply, replies.AllHadOk());
  if (!shaped.cursors_to_kill.empty()) CheckBackendCommand(KillCursorsCommand(shaped));
  return Outcome::kRan;
}

}  // namespace remold::fuzz
