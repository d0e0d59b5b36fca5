// One client connection: a coroutine that reads a request, relays it to the
// session's own connection to the backend member it is routed to
// (proxy/backend_links.h), and relays every reply back.
//
// Requests are handled one at a time, as drivers send them. A request with
// moreToCome gets no reply; a reply with moreToCome (exhaust cursor,
// streaming hello) is followed by more, all relayed. Requests are forwarded
// byte for byte unless the proxy must act: OP_COMPRESSED is unwrapped (and
// the replies compressed the same way) and the handshake reply is rewritten.
// A message that cannot be trusted gets a MongoDB error or, when its framing
// is broken, the connection is closed; no other session is affected.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "proxy/asio.h"
#include "proxy/backend_links.h"
#include "proxy/connection_policy.h"
#include "proxy/message_stream.h"
#include "proxy/metrics.h"
#include "proxy/rewrite_bridge.h"
#include "proxy/routing/request_route.h"
#include "proxy/routing/route_pins.h"
#include "proxy/routing/topology_monitor.h"
#include "proxy/wire/backend_uri.h"
#include "proxy/wire/compression.h"
#include "proxy/wire/request.h"
#include "rewrite/capabilities.h"
#include "rewrite/plan.h"
#include "ruleset/rule_set.h"

namespace remold {

class Session : public std::enable_shared_from_this<Session> {
 public:
  // Everything shared between sessions; owned by the Server.
  struct Shared {
    const BackendOptions& backend;
    const RuleSetHolder& rules;
    EnsuredCommands& ensured;
    const ConnectionPolicy& policy;  // TLS and client limits
    // Requests slower than this are logged (warn); 0: no slow-operation log.
    std::chrono::milliseconds slow_operation{0};
    // The monitored backend (proxy/routing/topology_monitor.h); null with
    // directConnection=true: one backend connection, the URI's hosts in order.
    TopologyMonitor* topology = nullptr;
    RoutingPins* pins = nullptr;  // with `topology`
    // Whether the handshake reply agrees to compress the client link with
    // what the client offered; off: the client link stays plain.
    bool client_compression = false;
    // Where the rewriting of a large message runs (proxy/heavy_work.h);
    // null: on the session's own thread.
    asio::thread_pool* heavy_work = nullptr;
    // The worker's pool of backend connections in pooled mode
    // (proxy/backend_pool.h); null: the session opens its own.
    std::shared_ptr<BackendPool> pool;
  };

  Session(Socket client, Shared shared, uint64_t id);

  awaitable<void> Run();

  // Ends the session at the next request boundary: at once if idle, after
  // the reply if a request is in flight. Called on the session's executor.
  void Drain();
  // Ends the session now, whatever it is doing.
  void Abort();
  // Ends the session if it is between requests and the backend closed the
  // connection that carries its client's credentials (a restart): its
  // driver then discards the connection instead of sending a request into
  // it. Cheap when the client never authenticated. Called on the session's
  // executor, from its worker's periodic sweep.
  void CheckIdleBackend();

 private:
  enum class State { kIdle, kBusy };
  // How choosing the backend member for a request ended.
  enum class Routed { kReady, kRefused, kLost };  // refused: the client got an error

  // What to do with a reply read from the backend.
  enum class ReplyVerdict { kRelay, kResend, kClose };

  // Decodes request_ into `request` and counts it; the error the client
  // gets when it cannot be decoded.
  std::optional<wire::WireError> Admit(wire::Request& request);
  // A decoded request: a rule's plan, an answer of remold's own, or the
  // fast path, which forwards it and relays every reply.
  awaitable<bool> Dispatch(const wire::Request& request);
  // Counts the reply in reply_ and says whether it goes to the client, or
  // the member answered as a former primary (`may_resend`: the request
  // goes to the new primary, or the client connection closes).
  ReplyVerdict CheckReply(const wire::Request& request, bool may_resend);
  awaitable<bool> ReplyWithError(const wire::Request& request, const wire::WireError& error);
  // Makes links_.current() the connection `route_` goes to (the only one
  // with directConnection=true), waiting up to the backend's
  // serverSelectionTimeoutMS for a member; refuses the request with
  // FailedToSatisfyReadPreference (133) when none comes, as mongos does.
  awaitable<Routed> UseBackend(const wire::Request& request);
  // UseBackend when the member's connection is open already (the common
  // case): no coroutine frame. False when it would connect or wait.
  bool UseOpenBackend();
  void CountRoute();
  // Pooled mode: no connection was free within the pool's wait timeout.
  // ExceededTimeLimit (262), which drivers retry, labelled as a retryable
  // write or a transient transaction error where the request is one.
  awaitable<void> RefusePoolTimeout(const wire::Request& request);
  // Reports the member and sends request_ to the member chosen now.
  awaitable<bool> ResendToNewPrimary(const wire::Request& request);
  // With the backend URI's compressors=: makes the compression offer on
  // links_.current() before `request` goes there (proxy/wire/backend_compression.h),
  // in the client's handshake or a hello of remold's own. False when the
  // backend connection was lost.
  awaitable<bool> OfferCompression(const wire::Request& request);
  // What remold offers the backend: the backend URI's compressors=, else
  // what the client offered in its handshake (its compression was meant
  // for the network, which in a sidecar is the backend link).
  const std::vector<wire::Compressor>& BackendOffer() const;
  void RewriteOffer();
  // `message` as it goes to links_.current(): compressed when the link
  // compresses and `command` may be; counted in backend_bytes_sent.
  std::span<const uint8_t> ForBackend(std::span<const uint8_t> message, std::string_view command);
  // After reading reply_ from the backend: counts it and decompresses an
  // OP_COMPRESSED reply in place. False when it cannot be decompressed.
  bool InflateBackendReply();
  // Runs the plan and counts it in the rule's metrics.
  awaitable<bool> ExecutePlan(const wire::Request& request, Plan& plan);
  awaitable<bool> RunPlan(const wire::Request& request, Plan& plan);
  // Runs the plan's prerequisites not yet run in this process; `failed`
  // gets the reply of the first that failed (the client's reply). False
  // when the backend connection was lost.
  awaitable<bool> EnsurePrerequisites(const Plan& plan, std::optional<Doc>& failed);
  // Sends the plan's commands as rewrite/plan_runner.h decides and shapes
  // the client's reply; nullopt when the backend connection was lost.
  awaitable<std::optional<ShapedReply>> RunCommands(const wire::Request& request, Plan plan);
  // Counts and logs the documents a rule's reply returned as stored.
  void NoteReturnedAsStored(const std::string& rule, int64_t documents);
  // Sends one command to the backend and reads its reply document.
  awaitable<std::optional<Doc>> RoundTrip(const BackendCommand& command);
  // RoundTrip, sent again to the new primary when the member answers that
  // it is no longer the primary (the command did not run).
  awaitable<std::optional<Doc>> RoundTripToPrimary(const BackendCommand& command);
  awaitable<std::optional<bool>> CollectionExists(const BackendCommand& command);
  awaitable<bool> SendReply(const wire::Request& request, const Doc& reply);
  // Every message to the client goes through WriteToClient or
  // SendToClientNow (they count bytes_sent).
  awaitable<bool> WriteToClient(std::span<const uint8_t> message);
  // WriteToClient's first step, without a coroutine: counts the bytes and
  // sends what the socket takes at once (MessageStream::WriteNow).
  std::optional<std::span<const uint8_t>> SendToClientNow(std::span<const uint8_t> message);
  void LogSlowOperation(const wire::Request& request, std::chrono::nanoseconds elapsed) const;
  void ShapeReply(const wire::Request& request);
  void ReleaseLargeBuffers();

  MessageStream client_;
  BackendLinks links_;
  std::optional<RequestRoute> route_;  // the request in progress, monitored backends only
  Shared shared_;
  Capabilities capabilities_;
  const uint64_t id_;
  State state_ = State::kIdle;
  bool draining_ = false;
  int32_t next_reply_id_ = 1;
  int32_t next_backend_id_ = 1 << 30;  // remold's own requests to the backend
  std::vector<wire::Compressor> negotiated_;    // with the client
  std::vector<wire::Compressor> client_offer_;  // the client's first handshake offered
  std::vector<uint8_t> request_;
  std::vector<uint8_t> reply_;
  std::vector<uint8_t> compressed_;     // the last message compressed for the backend
  bool offered_compression_ = false;    // request_ is a handshake carrying remold's offer

  // Observability (proxy/metrics.h): this worker thread's shard (set when
  // Run starts, on the worker), and what the request in progress did.
  MetricsShard* metrics_ = nullptr;
  uint64_t requests_ = 0;
  std::chrono::steady_clock::time_point forwarded_at_;  // request sent to the backend
  RuleMetrics* rule_metrics_ = nullptr;                  // the rule that rewrote it
  bool request_failed_ = false;  // the client got a command error, or a follow-up failed
  bool rule_error_counted_ = false;  // rule_metrics_->errors has this request
  // request_failed_, and the rule's error counted at once: before the reply
  // is written, so a client that reads the metrics after it sees it.
  void NoteRequestFailed();
};

}  // namespace remold
