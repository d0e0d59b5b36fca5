// One client connection: a coroutine that reads a request, relays it to the
// client's own backend connection, and relays every reply back.
//
// Requests are handled one at a time, as drivers send them. A request with
// moreToCome gets no reply; a reply with moreToCome (exhaust cursor,
// streaming hello) is followed by more, all relayed. Requests are forwarded
// byte for byte unless the proxy must act: OP_COMPRESSED is unwrapped (and
// the replies compressed the same way) and the handshake reply is rewritten.
// A message that cannot be trusted gets a MongoDB error or, when its framing
// is broken, the connection is closed; no other session is affected.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "proxy/asio.h"
#include "proxy/backend_uri.h"
#include "proxy/compression.h"
#include "proxy/message_stream.h"
#include "proxy/request.h"
#include "proxy/rewrite_bridge.h"
#include "rewrite/capabilities.h"
#include "rewrite/plan.h"
#include "rules/rule_set.h"

namespace remold {

class Session : public std::enable_shared_from_this<Session> {
 public:
  // Everything shared between sessions; owned by the Server.
  struct Shared {
    const BackendOptions& backend;
    const RuleSetHolder& rules;
    EnsuredCommands& ensured;
  };

  Session(tcp::socket client, Shared shared, uint64_t id);

  awaitable<void> Run();

  // Ends the session at the next request boundary: at once if idle, after
  // the reply if a request is in flight. Called on the session's executor.
  void Drain();
  // Ends the session now, whatever it is doing.
  void Abort();

 private:
  enum class State { kIdle, kBusy };

  awaitable<bool> Handle();
  awaitable<bool> RelayReplies(const wire::Request& request);
  awaitable<bool> ReplyWithError(const wire::Request& request, const wire::WireError& error);
  awaitable<bool> EnsureBackend();
  awaitable<bool> ExecutePlan(const wire::Request& request, Plan& plan);
  // kStopped: an ordered write stopped at a write error (replies shaped as
  // usual); kAnswered: the backend refused and the client has its error.
  enum class Outcome { kContinue, kStopped, kAnswered, kLost };
  awaitable<Outcome> RunCommands(const wire::Request& request, const Plan& plan,
                                 const std::vector<BackendCommand>& commands,
                                 std::vector<Doc>& replies);
  // Sends one command to the backend and reads its reply document.
  awaitable<std::optional<Doc>> RoundTrip(const BackendCommand& command);
  awaitable<bool> SendReply(const wire::Request& request, const Doc& reply);
  void ShapeReply(const wire::Request& request);
  void ReleaseLargeBuffers();

  MessageStream client_;
  std::unique_ptr<MessageStream> backend_;
  Shared shared_;
  Capabilities capabilities_;
  const uint64_t id_;
  State state_ = State::kIdle;
  bool draining_ = false;
  int32_t next_reply_id_ = 1;
  int32_t next_backend_id_ = 1 << 30;  // remold's own requests to the backend
  std::vector<wire::Compressor> negotiated_;
  std::vector<uint8_t> request_;
  std::vector<uint8_t> reply_;
};

}  // namespace remold
