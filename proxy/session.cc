#include "proxy/session.h"

#include <spdlog/spdlog.h>

#include <map>
#include <mutex>
#include <string_view>

#include "common/bson_walk.h"
#include "engine/engine.h"
#include "proxy/heavy_work.h"
#include "proxy/routing/mongos_persona.h"
#include "proxy/wire/backend_compression.h"
#include "proxy/wire/bson_check.h"
#include "proxy/wire/error_reply.h"
#include "proxy/wire/handshake.h"
#include "proxy/wire/op_compressed.h"
#include "proxy/wire/op_msg.h"
#include "proxy/wire/shared_link_hello.h"
#include "proxy/wire/wire_format.h"
#include "rewrite/command_namespace.h"
#include "rewrite/cursor_reply.h"
#include "rewrite/plan_runner.h"

namespace remold {
namespace {

// A command that may take a rule's index with it: indexes are ensured
// again from then on.
bool MayDropIndexes(std::string_view command) {
  return command == "drop" || command == "dropDatabase" || command == "dropIndexes" ||
         command == "deleteIndexes";
}

// How many times one request follows a moving primary before its error
// reaches the client.
constexpr int kMaxResends = 3;

// Buffers above this size are released after use, so one large document does
// not pin memory for the life of the connection.
constexpr size_t kRetainedBufferSize = 1 << 20;

using Clock = std::chrono::steady_clock;

// "db.collection" of a command for the slow-operation log ("db" for a
// command on the database, or one not known to name a collection).
std::string NamespaceOf(const wire::Request& request) {
  bson_t body;
  if (request.is_legacy() || !bson_init_static(&body, request.command_document.data(),
                                               request.command_document.size()))
    return "?";
  std::optional<CommandNamespace> ns = ResolveNamespace(request.command, &body);
  if (!ns) return "?";
  // Never the first string of a command not known to name a collection:
  // it may be a value of the application's (createUser's user name...).
  return ns->collection && ns->known ? ns->db + "." + *ns->collection : ns->db;
}

bool HasMoreToCome(const std::vector<uint8_t>& reply) {
  wire::MessageHeader header = wire::ReadHeader(reply);
  return header.op_code == static_cast<int32_t>(wire::OpCode::kMsg) &&
         reply.size() >= wire::kHeaderSize + 4 &&
         (wire::PeekOpMsgFlags(reply) & wire::msg_flags::kMoreToCome);
}

}  // namespace

Session::Session(Socket client, Shared shared, uint64_t id)
    : client_(std::move(client)),
      links_(BackendLinks::Shared{shared.backend, shared.policy, shared.topology, shared.pins, shared.pool}, id),
      shared_(shared),
      id_(id) {}

void Session::Drain() {
  draining_ = true;
  // Idle, unless a request has started to arrive: that one is served
  // first (Run's loop ends after it).
  if (state_ == State::kIdle && !client_.HasPendingInput()) Abort();
}

void Session::Abort() {
  client_.Close();
  links_.CloseAll();
}

void Session::CheckIdleBackend() {
  if (state_ != State::kIdle || client_.HasPendingInput()) return;
  if (links_.CredentialsLostWhileIdle()) Abort();
}

awaitable<void> Session::Run() {
  auto self = shared_from_this();
  metrics_ = &GlobalMetrics().LocalShard();  // on the worker thread, which this session never leaves
  metrics_->connections_opened.Add();
  struct CountClose {
    MetricsShard* metrics;
    ~CountClose() { metrics->connections_closed.Add(); }
  } count_close{metrics_};
  {
    boost::system::error_code ec;
    tcp::endpoint peer = client_.socket().remote_endpoint(ec);
    spdlog::info("session {}: open from {}", id_,
                 ec ? std::string("unknown peer")
                    : (peer.address().is_v6() ? "[" + peer.address().to_string() + "]"
                                              : peer.address().to_string()) +
                          ":" + std::to_string(peer.port()));
  }
  if (!co_await PrepareClient(client_, shared_.policy, id_)) {  // TLS, limits
    draining_ = true;
    metrics_->CountConnectionError(ConnectionError::kTlsHandshake);
  }
  while (!draining_) {
    state_ = State::kIdle;
    ReadStatus status = co_await client_.Read(request_);
    if (status == ReadStatus::kClosed) break;
    if (status == ReadStatus::kTooLarge) {
      metrics_->CountConnectionError(ConnectionError::kMessageTooLarge);
      GlobalMetrics().CountError(error_codes::kBSONObjectTooLarge.value);
      co_await RejectTooLarge(client_, next_reply_id_++, id_);
      break;
    }
    if (status == ReadStatus::kBadLength) {
      spdlog::warn("session {}: closing: message length {} is outside {}..{}", id_,
                   client_.bad_length(), wire::kMinMessageSize, wire::kMaxMessageSize);
      metrics_->CountConnectionError(ConnectionError::kBadMessage);
      break;
    }
    state_ = State::kBusy;
    // Decoded and dispatched here rather than in a coroutine of its own: a
    // nested coroutine costs a frame and a trip through Asio's frame stack
    // per request (measured with callgrind).
    wire::Request request;
    bool kept = false;
    if (std::optional<wire::WireError> error = Admit(request)) {
      if (error->close_connection || request.more_to_come) break;
      kept = co_await ReplyWithError(request, *error);
    } else if (shared_.slow_operation.count() == 0 || request.is_handshake) {
      // Awaitable hello waits by design: never a slow operation.
      kept = co_await Dispatch(request);
    } else {
      const Clock::time_point started = Clock::now();
      kept = co_await Dispatch(request);
      if (const auto elapsed = Clock::now() - started; elapsed >= shared_.slow_operation)
        LogSlowOperation(request, elapsed);
    }
    if (!kept) break;
    links_.FinishRequest();
    ReleaseLargeBuffers();
  }
  Abort();
  links_.DiscardHeld();
  spdlog::info("session {}: closed after {} request(s)", id_, requests_);
}

std::optional<wire::WireError> Session::Admit(wire::Request& request) {
  metrics_->bytes_received.Add(request_.size());  // as received: before decompression
  if (std::optional<wire::WireError> error = wire::DecodeRequest(request_, request)) {
    spdlog::warn("session {}: rejected request {}: {}", id_, request.header.request_id, error->message);
    if (error->close_connection) metrics_->CountConnectionError(ConnectionError::kBadMessage);
    return error;
  }
  ++requests_;
  metrics_->CountRequest(request.command);
  rule_metrics_ = nullptr;
  request_failed_ = false;
  rule_error_counted_ = false;
  return std::nullopt;
}

void Session::NoteRequestFailed() {
  request_failed_ = true;
  if (rule_metrics_ && !rule_error_counted_) {
    rule_metrics_->errors.Add();
    rule_error_counted_ = true;
  }
}

void Session::LogSlowOperation(const wire::Request& request,
                               std::chrono::nanoseconds elapsed) const {
  metrics_->slow_operations.Add();
  // Names and numbers only: never the command's documents.
  spdlog::warn("session {}: slow operation: {} on {} took {:.1f} ms{}{}{}", id_, request.command,
               NamespaceOf(request), static_cast<double>(elapsed.count()) / 1e6,
               rule_metrics_ ? ", rule " : "", rule_metrics_ ? rule_metrics_->name : "",
               request_failed_ ? ", failed" : "");
}

awaitable<bool> Session::Dispatch(const wire::Request& request) {
  route_.reset();
  // Pooled mode routes every request: its pins need the route.
  if (shared_.topology || links_.pooled()) {
    std::variant<RequestRoute, SelectionError> route = RouteOf(request, shared_.backend.heartbeat);
    if (auto* error = std::get_if<SelectionError>(&route)) {
      if (request.more_to_come) co_return true;
      // Named: g++ 12 destroys a temporary in a co_await expression twice.
      const wire::WireError refusal{error->code, error->message};
      co_return co_await ReplyWithError(request, refusal);
    }
    route_ = std::get<RequestRoute>(std::move(route));
  }
  // Compared as string_view: its size first, inline (std::string against a
  // literal calls strlen and compare; measured).
  if (const std::string_view command = request.command;
      command == "find" || command == "listShards" || command == "isdbgrid") {
    if (std::optional<Doc> answer = AnswerAsMongos(request, links_.view(), shared_.backend))
      co_return co_await SendReply(request, *answer);
  }
  if (std::shared_ptr<const RuleSet> rules = shared_.rules.Load(); !rules->empty()) {
    if (std::optional<Command> command = CommandForRules(request, *rules)) {
      std::optional<Plan> plan;
      if (request_.size() >= kHeavyWorkBytes && shared_.heavy_work)
        co_await RunOn(*shared_.heavy_work, [&] { plan = Rewrite(*command, *rules, capabilities_); });
      else
        plan = Rewrite(*command, *rules, capabilities_);
      if (plan) {
        // Every command of a plan goes to the primary (or the transaction's member).
        if (route_) route_->kind = RequestRoute::Kind::kPrimary;
        co_return co_await ExecutePlan(request, *plan);
      }
    }
  }
  // Pooled: an awaitable hello waits here, holding no backend connection,
  // and then asks the backend at once (wire::SharedLinkHello).
  if (request.is_handshake && links_.pooled()) {
    if (std::optional<std::chrono::milliseconds> wait = wire::AwaitableHelloWait(request.command_document)) {
      SteadyTimer pause(co_await asio::this_coro::executor, *wait);
      boost::system::error_code ignored;
      co_await pause.async_wait(asio::redirect_error(use_awaitable, ignored));
    }
  }
  // The common path opens no coroutine frame: the member's connection is open.
  Routed routed = Routed::kReady;
  if (!UseOpenBackend()) routed = co_await UseBackend(request);
  if (routed != Routed::kReady) co_return routed == Routed::kRefused;
  links_.NoteSending(request, route_, route_ ? route_->authenticates : IsAuthentication(request));
  if (request.is_handshake && client_offer_.empty()) client_offer_ = request.offered_compressors;
  if (request.is_handshake && links_.pooled()) {
    // `request` keeps only its decoded fields from here on: its spans
    // pointed into the message replaced.
    if (std::optional<std::vector<uint8_t>> shared = wire::SharedLinkHello(request_)) request_ = std::move(*shared);
  }
  if (!BackendOffer().empty() && (request.is_handshake || links_.needs_compression_offer())) {
    if (!co_await OfferCompression(request)) co_return false;
  }
  forwarded_at_ = Clock::now();
  // Sent without a coroutine when the socket takes it at once (WriteNow).
  MessageStream& backend = links_.current();
  const std::optional<std::span<const uint8_t>> unsent = backend.WriteNow(ForBackend(request_, request.command));
  bool sent = unsent.has_value();
  if (sent && !unsent->empty()) sent = co_await backend.Write(*unsent);
  if (!sent) {
    spdlog::warn("session {}: backend connection lost while sending", id_);
    metrics_->CountConnectionError(ConnectionError::kBackendLost);
    co_return false;
  }
  if (request.more_to_come) co_return true;
  if (request.is_handshake && shared_.client_compression) negotiated_ = request.offered_compressors;
  // The replies are relayed here rather than in a coroutine of their own
  // (a frame per request, measured with callgrind).
  bool relayed = true;
  int resent = 0;
  for (bool first = true;;) {
    const ReadStatus read = co_await links_.current().Read(reply_);
    if (read != ReadStatus::kOk || !InflateBackendReply()) {
      spdlog::warn("session {}: backend connection lost while awaiting a reply", id_);
      metrics_->CountConnectionError(ConnectionError::kBackendLost);
      relayed = false;
      break;
    }
    // Handshakes are left out: an awaitable hello waits by design.
    if (first && !request.is_handshake) metrics_->backend_roundtrip.Observe(Clock::now() - forwarded_at_);
    const ReplyVerdict verdict = CheckReply(request, first && resent < kMaxResends);
    if (verdict == ReplyVerdict::kClose) {
      relayed = false;
      break;
    }
    if (verdict == ReplyVerdict::kResend) {
      ++resent;
      const bool resent_ok = co_await ResendToNewPrimary(request);
      if (resent_ok) continue;  // its reply is the client's
      CheckReply(request, false);  // this reply is: counted as any other
    }
    const bool more = HasMoreToCome(reply_);
    if (first && more) links_.NoteExhaust();
    first = false;
    ShapeReply(request);
    // WriteToClient without its coroutine frame when the socket takes the reply at once.
    const std::optional<std::span<const uint8_t>> unsent = SendToClientNow(reply_);
    bool written = unsent.has_value();
    if (written && !unsent->empty()) written = co_await client_.Write(*unsent);
    if (!written) {
      relayed = false;
      break;
    }
    if (!more) break;
  }
  if (MayDropIndexes(request.command)) shared_.ensured.Clear();
  co_return relayed;
}

Session::ReplyVerdict Session::CheckReply(const wire::Request& request, bool may_resend) {
  if (request.is_handshake) return ReplyVerdict::kRelay;
  // One scan of the reply's errors serves the resend, the metrics and the pins.
  const std::optional<wire::ReplyErrors> errors = wire::ScanReplyErrors(OpMsgBody(reply_));
  if (may_resend && links_.AnsweredAsFormerPrimary(route_, errors)) {
    if (!links_.authenticated()) return ReplyVerdict::kResend;
    // The member ran nothing; the client's credentials cannot follow the
    // primary. Closing is a network error a driver retries on a new
    // connection, authenticated again where the primary is.
    spdlog::info("session {}: {} answered as a former primary; the client authenticated there: "
                 "closing the client connection so its driver reconnects",
                 id_, links_.current_address());
    links_.ReportFormerPrimary();
    return ReplyVerdict::kClose;
  }
  if (GlobalMetrics().CountScannedReplyErrors(errors)) NoteRequestFailed();
  if (route_) links_.NoteReply(*route_, OpMsgBody(reply_), errors);
  return ReplyVerdict::kRelay;
}

awaitable<bool> Session::ResendToNewPrimary(const wire::Request& request) {
  spdlog::info("session {}: {} answered as a former primary; sending the request to the new primary", id_,
               links_.current_address());
  links_.ReportFormerPrimary();
  const BackendLinks::Choice choice = co_await links_.Use(route_);
  if (choice != BackendLinks::Choice::kReady) co_return false;
  CountRoute();
  if (!BackendOffer().empty() && links_.needs_compression_offer() && !co_await OfferCompression(request))
    co_return false;
  forwarded_at_ = Clock::now();
  const bool sent = co_await links_.current().Write(ForBackend(request_, request.command));
  co_return sent;
}

void Session::ShapeReply(const wire::Request& request) {
  if (request.is_handshake) {
    if (auto document = wire::HandshakeReplyDocument(reply_)) {
      UpdateCapabilities(*document, capabilities_);
      if (offered_compression_) links_.NoteCompressionChosen(wire::ChosenCompressor(*document, BackendOffer()));
    }
    offered_compression_ = false;
    if (!wire::RewriteHandshakeMessage(reply_, negotiated_,
                                       shared_.policy.limits.max_message_size))
      spdlog::warn("session {}: backend handshake reply is malformed; relayed as is", id_);
    return;
  }
  if (request.compressor) reply_ = wire::CompressMessage(reply_, *request.compressor);
}

awaitable<bool> Session::ReplyWithError(const wire::Request& request,
                                        const wire::WireError& error) {
  int32_t op_code = request.header.op_code;
  if (op_code != static_cast<int32_t>(wire::OpCode::kQuery)) op_code = static_cast<int32_t>(wire::OpCode::kMsg);
  std::vector<uint8_t> reply =
      wire::EncodeErrorReply(error, request.header.request_id, op_code, next_reply_id_++);
  if (request.compressor) reply = wire::CompressMessage(reply, *request.compressor);
  GlobalMetrics().CountError(error.code.value);
  NoteRequestFailed();
  co_return co_await WriteToClient(reply);
}

awaitable<bool> Session::WriteToClient(std::span<const uint8_t> message) {
  const std::optional<std::span<const uint8_t>> unsent = SendToClientNow(message);
  if (!unsent) co_return false;
  if (unsent->empty()) co_return true;
  co_return co_await client_.Write(*unsent);
}

std::optional<std::span<const uint8_t>> Session::SendToClientNow(std::span<const uint8_t> message) {
  metrics_->bytes_sent.Add(message.size());
  return client_.WriteNow(message);
}

bool Session::UseOpenBackend() {
  if (!links_.UseOpen(route_)) return false;
  CountRoute();
  return true;
}

void Session::CountRoute() {
  if (route_ && route_->kind != RequestRoute::Kind::kHandshake)
    metrics_->CountRoute(static_cast<size_t>(route_->preference.mode), static_cast<size_t>(links_.current_kind()));
}

awaitable<void> Session::RefusePoolTimeout(const wire::Request& request) {
  const std::string message = "remold: no pooled backend connection was free within " +
                              std::to_string(shared_.pool->options().wait_timeout.count()) +
                              " ms (waitQueueTimeoutMS of the backend URI)";
  spdlog::warn("session {}: {} for {}", id_, message, request.command);
  if (request.more_to_come) co_return;
  if (request.is_legacy()) {
    const wire::WireError refusal{ErrorCode{262, "ExceededTimeLimit"}, message};
    co_await ReplyWithError(request, refusal);
    co_return;
  }
  bool has_txn_number = false;
  WalkTopLevel(request.command_document, [&has_txn_number](const BsonElement& element) {
    has_txn_number = element.key == "txnNumber";
    return !has_txn_number;
  });
  Doc reply;
  BSON_APPEND_DOUBLE(reply.mut(), "ok", 0);
  AppendString(reply.mut(), "errmsg", message);
  BSON_APPEND_INT32(reply.mut(), "code", 262);
  AppendString(reply.mut(), "codeName", "ExceededTimeLimit");
  const bool in_transaction = route_ && !route_->transaction.empty();
  if (has_txn_number) {
    bson_t labels;
    BSON_APPEND_ARRAY_BEGIN(reply.mut(), "errorLabels", &labels);
    BSON_APPEND_UTF8(&labels, "0", in_transaction ? "TransientTransactionError" : "RetryableWriteError");
    bson_append_array_end(reply.mut(), &labels);
  }
  co_await SendReply(request, reply);
}

awaitable<Session::Routed> Session::UseBackend(const wire::Request& request) {
  if (UseOpenBackend()) co_return Routed::kReady;
  const BackendLinks::Choice choice = co_await links_.Use(route_);
  if (choice == BackendLinks::Choice::kReady) {
    CountRoute();
    co_return Routed::kReady;
  }
  if (choice == BackendLinks::Choice::kLost) {
    metrics_->CountConnectionError(ConnectionError::kBackendUnreachable);
    co_return Routed::kLost;
  }
  if (choice == BackendLinks::Choice::kPoolTimeout) {
    co_await RefusePoolTimeout(request);
    co_return Routed::kRefused;
  }
  if (request.is_handshake) co_return Routed::kLost;
  std::string wanted = route_->kind == RequestRoute::Kind::kRead
                           ? std::string(ReadPreferenceModeName(route_->preference.mode))
                           : "primary";
  spdlog::warn("session {}: no backend member for a {} {} within {} ms", id_, wanted, request.command,
               shared_.backend.server_selection_timeout.count());
  if (request.more_to_come) co_return Routed::kRefused;
  const wire::WireError refusal{
      ErrorCode{133, "FailedToSatisfyReadPreference"},
      "Could not find host matching read preference { mode: \"" + wanted + "\" } for set " +
          (links_.view()->set_name.empty() ? "remold backend" : links_.view()->set_name)};
  co_await ReplyWithError(request, refusal);
  co_return Routed::kRefused;
}

awaitable<std::optional<Doc>> Session::RoundTripToPrimary(const BackendCommand& command) {
  std::optional<Doc> reply = co_await RoundTrip(command);
  // A member that answers NotWritablePrimary (or, for a read, not
  // secondaryOk) did not run the command: once the monitor finds the new
  // primary it goes there, as a driver retries. Never inside a client's
  // transaction, which lives on its member.
  // An authenticated session cannot follow the primary: its credentials
  // are on this connection only; the reply (a follow-up's failure) stands.
  for (int resent = 0; resent < kMaxResends && reply && !links_.authenticated() &&
                       links_.AnsweredAsFormerPrimary(route_, wire::ScanReplyErrors(reply->bytes()));
       ++resent) {
    spdlog::info("session {}: {} answered as a former primary; sending a rewritten command to the new primary",
                 id_, links_.current_address());
    links_.ReportFormerPrimary();
    const BackendLinks::Choice choice = co_await links_.Use(route_);
    if (choice != BackendLinks::Choice::kReady) break;
    reply = co_await RoundTrip(command);
  }
  co_return reply;
}

awaitable<std::optional<Doc>> Session::RoundTrip(const BackendCommand& command) {
  std::vector<uint8_t> message = EncodeBackendCommand(command, next_backend_id_++);
  const Clock::time_point sent = Clock::now();
  if (!co_await links_.current().Write(ForBackend(message, wire::FirstKey(command.body.bytes()))) ||
      co_await links_.current().Read(reply_) != ReadStatus::kOk || !InflateBackendReply()) {
    metrics_->CountConnectionError(ConnectionError::kBackendLost);
    co_return std::nullopt;
  }
  metrics_->backend_roundtrip.Observe(Clock::now() - sent);
  wire::OpMsgView view;
  if (wire::ReadHeader(reply_).op_code != static_cast<int32_t>(wire::OpCode::kMsg) ||
      wire::ParseOpMsg(reply_, view)) {
    spdlog::warn("session {}: backend sent a malformed reply to a rewritten command", id_);
    metrics_->CountConnectionError(ConnectionError::kBackendLost);
    co_return std::nullopt;
  }
  co_return Doc::FromBytes(view.body);
}

std::span<const uint8_t> Session::ForBackend(std::span<const uint8_t> message, std::string_view command) {
  std::span<const uint8_t> out = message;
  if (std::optional<wire::Compressor> c = links_.compressor(); c && wire::MayCompress(command)) {
    compressed_ = wire::CompressMessage(message, *c);
    out = compressed_;
  }
  metrics_->backend_bytes_sent.Add(out.size());
  return out;
}

bool Session::InflateBackendReply() {
  metrics_->backend_bytes_received.Add(reply_.size());
  if (wire::ReadHeader(reply_).op_code != static_cast<int32_t>(wire::OpCode::kCompressed)) return true;
  std::vector<uint8_t> original;
  wire::Compressor used = wire::Compressor::kNoop;
  if (auto error = wire::DecompressMessage(reply_, original, used)) {
    spdlog::warn("session {}: backend sent a compressed reply remold cannot decompress: {}", id_, error->message);
    return false;
  }
  reply_.swap(original);
  return true;
}

const std::vector<wire::Compressor>& Session::BackendOffer() const {
  return shared_.backend.compressors.empty() ? client_offer_ : shared_.backend.compressors;
}

awaitable<bool> Session::OfferCompression(const wire::Request& request) {
  // A pooled connection's offer is a hello of remold's own, once.
  const bool client_handshake = request.is_handshake && !links_.pooled();
  if (!links_.needs_compression_offer()) {
    // Every client handshake carries remold's offer: the client's list is
    // for its own link, and a backend may renegotiate on a later hello.
    if (client_handshake) RewriteOffer();
    co_return true;
  }
  if (client_handshake) {
    // The client's handshake comes first: it carries the offer (a hello of
    // remold's own before it would make its client metadata an error).
    RewriteOffer();
    co_return true;
  }
  const std::vector<uint8_t> hello =
      wire::EncodeOpMsg(next_backend_id_++, 0, 0, wire::OfferHelloCommand(BackendOffer()));
  metrics_->backend_bytes_sent.Add(hello.size());
  // One co_await per statement: g++ 12 miscompiles co_await inside || chains.
  bool answered = co_await links_.current().Write(hello);
  if (answered) answered = co_await links_.current().Read(reply_) == ReadStatus::kOk;
  wire::OpMsgView view;
  if (!answered || !InflateBackendReply() ||
      wire::ReadHeader(reply_).op_code != static_cast<int32_t>(wire::OpCode::kMsg) || wire::ParseOpMsg(reply_, view)) {
    spdlog::warn("session {}: backend connection lost while offering compression", id_);
    metrics_->CountConnectionError(ConnectionError::kBackendLost);
    co_return false;
  }
  const std::optional<wire::Compressor> chosen = wire::ChosenCompressor(view.body, BackendOffer());
  links_.NoteCompressionChosen(chosen);
  spdlog::debug("session {}: backend connection compresses with {}", id_,
                chosen ? wire::CompressorName(*chosen) : "nothing (the backend chose none offered)");
  co_return true;
}

void Session::RewriteOffer() {
  if (std::optional<std::vector<uint8_t>> offered = wire::WithCompressionOffer(request_, BackendOffer())) {
    request_ = std::move(*offered);
    offered_compression_ = true;
  }
}

awaitable<bool> Session::SendReply(const wire::Request& request, const Doc& reply) {
  if (request.more_to_come) co_return true;  // the client asked for no reply
  std::vector<uint8_t> message = wire::EncodeOpMsg(next_reply_id_++, request.header.request_id, 0,
                                                   reply.bytes());
  if (request.compressor) message = wire::CompressMessage(message, *request.compressor);
  if (GlobalMetrics().CountReplyErrors(reply.bytes())) NoteRequestFailed();
  if (route_ && links_.pooled()) links_.NotePooledReply(*route_, reply.bytes(), wire::ScanReplyErrors(reply.bytes()));
  co_return co_await WriteToClient(message);
}

awaitable<bool> Session::ExecutePlan(const wire::Request& request, Plan& plan) {
  rule_metrics_ = &GlobalMetrics().ForRule(plan.rule);
  rule_metrics_->rewrites.Add();
  const Clock::time_point started = Clock::now();
  const bool kept = co_await RunPlan(request, plan);
  rule_metrics_->seconds.Observe(Clock::now() - started);
  if (!kept) NoteRequestFailed();  // (a failure the reply showed is counted already)
  co_return kept;
}

awaitable<bool> Session::RunPlan(const wire::Request& request, Plan& plan) {
  if (plan.immediate_reply) {
    spdlog::debug("session {}: rule {} answered {} itself", id_, plan.rule, request.command);
    co_return co_await SendReply(request, *plan.immediate_reply);
  }
  const Routed routed = co_await UseBackend(request);
  if (routed != Routed::kReady) co_return routed == Routed::kRefused;
  links_.NoteSending(request, route_, false);
  if (!BackendOffer().empty() && links_.needs_compression_offer() && !co_await OfferCompression(request))
    co_return false;
  std::optional<Doc> failed;
  if (!co_await EnsurePrerequisites(plan, failed)) co_return false;
  if (failed) co_return co_await SendReply(request, *failed);
  const std::string rule = plan.rule;
  std::optional<ShapedReply> shaped = co_await RunCommands(request, std::move(plan));
  if (!shaped) co_return false;
  if (!shaped->warnings.empty()) {
    // The details quote backend errors and values of documents: only at debug.
    NoteRequestFailed();
    spdlog::warn("session {}: rule {}: {} follow-up(s) failed after the client's {}; run `remold "
                 "reconcile` to repair them (details at log level debug)",
                 id_, rule, shaped->warnings.size(), request.command);
    for (const std::string& warning : shaped->warnings)
      spdlog::debug("session {}: rule {}: {}", id_, rule, warning);
  }
  for (const std::string& notice : shaped->notices) spdlog::info("session {}: rule {}: {}", id_, rule, notice);
  if (shaped->returned_as_stored > 0) NoteReturnedAsStored(rule, shaped->returned_as_stored);
  if (!co_await SendReply(request, shaped->reply)) co_return false;
  if (!shaped->cursors_to_kill.empty()) {
    if (!co_await RoundTrip(KillCursorsCommand(*shaped))) co_return false;
  }
  co_return true;
}

// Whether the collection a command addresses (its first element's value,
// in its $db) exists; nullopt when the backend connection failed.
awaitable<std::optional<bool>> Session::CollectionExists(const BackendCommand& command) {
  bson_iter_t first;
  std::string collection;
  if (bson_iter_init(&first, command.body.get()) && bson_iter_next(&first) && BSON_ITER_HOLDS_UTF8(&first))
    collection = bson_iter_utf8(&first, nullptr);
  BackendCommand list;
  Doc filter;
  AppendString(filter.mut(), "name", collection);
  BSON_APPEND_INT32(list.body.mut(), "listCollections", 1);
  AppendDoc(list.body.mut(), "filter", filter);
  BSON_APPEND_BOOL(list.body.mut(), "nameOnly", true);
  AppendString(list.body.mut(), "$db", FindString(command.body.get(), "$db").value_or("admin"));
  std::optional<Doc> reply = co_await RoundTrip(list);
  if (!reply) co_return std::nullopt;
  // A failed listCollections (an unauthorized user) says nothing: ensure.
  if (!IsOkReply(*reply)) co_return true;
  // The name is checked too: a backend may answer without the filter.
  for (const Doc& info : FirstBatch(*reply))
    if (FindString(info.get(), "name") == collection) co_return true;
  std::optional<Doc> cursor = FindDocument(reply->get(), "cursor");
  co_return cursor && FindInteger(cursor->get(), "id").value_or(0) != 0;  // more to read: assume so
}

awaitable<bool> Session::EnsurePrerequisites(const Plan& plan, std::optional<Doc>& failed) {
  for (const BackendCommand& ensure : plan.ensure) {
    auto bytes = ensure.body.bytes();
    std::string key(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    if (shared_.ensured.Contains(key)) continue;
    if (ensure.skip_if_collection_missing) {
      std::optional<bool> exists = co_await CollectionExists(ensure);
      if (!exists) co_return false;
      if (!*exists) continue;  // not cached: ensured once the collection exists
    }
    std::optional<Doc> reply = co_await RoundTrip(ensure);
    if (!reply) co_return false;
    const bool holds = ensure.holds_on_code != 0 && FindInteger(reply->get(), "code") == ensure.holds_on_code;
    if (!IsOkReply(*reply) && !holds) {
      // errmsg may quote a document (a duplicate key): only at debug.
      spdlog::warn("session {}: rule {}: prerequisite failed: code {} {}", id_, plan.rule,
                   FindInteger(reply->get(), "code").value_or(0),
                   FindString(reply->get(), "codeName").value_or("(no codeName)"));
      spdlog::debug("session {}: rule {}: prerequisite failed: {}", id_, plan.rule,
                    FindString(reply->get(), "errmsg").value_or("unknown error"));
      if (ensure.needed_for.empty()) {
        failed = std::move(reply);
      } else {
        const std::string errmsg = FindString(reply->get(), "errmsg").value_or("unknown error");
        failed = ErrorReply(static_cast<int>(FindInteger(reply->get(), "code").value_or(0)),
                            FindString(reply->get(), "codeName").value_or(""), ensure.needed_for + ": " + errmsg);
      }
      co_return true;
    }
    shared_.ensured.Add(key);
  }
  co_return true;
}

awaitable<std::optional<ShapedReply>> Session::RunCommands(const wire::Request& request,
                                                           Plan plan) {
  PlanRunner runner(std::move(plan));
  bool heavy = false;  // a large reply: shaping the client's reply may be too (proxy/heavy_work.h)
  const BackendCommand* command = runner.Next();
  while (command) {
    if (spdlog::should_log(spdlog::level::debug))
      spdlog::debug("session {}: rule {}: sends {}", id_, runner.plan().rule,
                    FoldedCommand(*command).ToRelaxedJson());
    std::optional<Doc> reply = co_await RoundTripToPrimary(*command);
    if (!reply) {
      spdlog::warn("session {}: backend connection lost during a rewritten {}", id_,
                   request.command);
      co_return std::nullopt;
    }
    if (reply->bytes().size() >= kHeavyWorkBytes && shared_.heavy_work) {
      heavy = true;
      co_await RunOn(*shared_.heavy_work, [&] {
        runner.Accept(std::move(*reply));
        command = runner.Next();
      });
    } else {
      runner.Accept(std::move(*reply));
      command = runner.Next();
    }
  }
  if (MayDropIndexes(request.command) && !runner.refused()) shared_.ensured.Clear();
  if (!heavy) co_return runner.Finish();
  std::optional<ShapedReply> shaped;
  co_await RunOn(*shared_.heavy_work, [&] { shaped = runner.Finish(); });
  co_return shaped;
}

// Counted every time; logged once a minute at most per rule, so that a
// collection read often does not flood the log.
void Session::NoteReturnedAsStored(const std::string& rule, int64_t documents) {
  rule_metrics_->returned_as_stored.Add(static_cast<uint64_t>(documents));
  static std::mutex mutex;
  static std::map<std::string, Clock::time_point> last_logged;
  std::lock_guard<std::mutex> lock(mutex);
  const Clock::time_point now = Clock::now();
  auto [last, first] = last_logged.try_emplace(rule, now);
  if (!first && now - last->second < std::chrono::minutes(1)) return;
  last->second = now;
  spdlog::warn("session {}: rule {}: {} document(s) returned as stored: they are not in the rule's form and "
               "cannot be turned into it (written behind remold's back?); `remold check --backend` counts them "
               "(logged once a minute at most; remold_documents_returned_as_stored_total counts them all)",
               id_, rule, documents);
}

void Session::ReleaseLargeBuffers() {
  if (request_.capacity() > kRetainedBufferSize) std::vector<uint8_t>().swap(request_);
  if (reply_.capacity() > kRetainedBufferSize) std::vector<uint8_t>().swap(reply_);
}

}  // namespace remold
