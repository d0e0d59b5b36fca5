#include "proxy/session.h"

#include <spdlog/spdlog.h>

#include <string_view>

#include "proxy/backend_connector.h"
#include "proxy/error_reply.h"
#include "proxy/handshake.h"
#include "proxy/mongos_persona.h"
#include "proxy/op_compressed.h"
#include "proxy/op_msg.h"
#include "proxy/reply_errors.h"
#include "proxy/wire_format.h"
#include "rewrite/command_namespace.h"
#include "rewrite/cursor_reply.h"
#include "rewrite/engine.h"
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

Session::Session(tcp::socket client, Shared shared, uint64_t id)
    : client_(std::move(client)), shared_(shared), id_(id) {
  random_ = static_cast<uint32_t>(id * 2654435761u);  // spreads sessions over equal members
}

void Session::Drain() {
  draining_ = true;
  // Idle, unless a request has started to arrive: that one is served
  // first (Run's loop ends after it).
  if (state_ == State::kIdle && !client_.HasPendingInput()) Abort();
}

void Session::Abort() {
  client_.Close();
  for (Link& link : links_) link.stream->Close();
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
    if (!co_await Handle()) break;
    ReleaseLargeBuffers();
  }
  Abort();
  spdlog::info("session {}: closed after {} request(s)", id_, requests_);
}

awaitable<bool> Session::Handle() {
  metrics_->bytes_received.Add(request_.size());  // as received: before decompression
  wire::Request request;
  if (auto error = wire::DecodeRequest(request_, request)) {
    spdlog::warn("session {}: rejected request {}: {}", id_, request.header.request_id,
                 error->message);
    if (error->close_connection) metrics_->CountConnectionError(ConnectionError::kBadMessage);
    if (error->close_connection || request.more_to_come) co_return false;
    co_return co_await ReplyWithError(request, *error);
  }
  ++requests_;
  metrics_->CountRequest(request.command);
  rule_metrics_ = nullptr;
  request_failed_ = false;
  // Awaitable hello waits by design: never a slow operation.
  if (shared_.slow_operation.count() == 0 || request.is_handshake)
    co_return co_await Dispatch(request);
  const Clock::time_point started = Clock::now();
  const bool kept = co_await Dispatch(request);
  if (const auto elapsed = Clock::now() - started; elapsed >= shared_.slow_operation)
    LogSlowOperation(request, elapsed);
  co_return kept;
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
  if (shared_.topology) {
    std::variant<RequestRoute, SelectionError> route = RouteOf(request, shared_.backend.heartbeat);
    if (auto* error = std::get_if<SelectionError>(&route)) {
      if (request.more_to_come) co_return true;
      // Named: g++ 12 destroys a temporary in a co_await expression twice.
      const wire::WireError refusal{error->code, error->message};
      co_return co_await ReplyWithError(request, refusal);
    }
    route_ = std::get<RequestRoute>(std::move(route));
  }
  if (request.command == "listShards" || request.command == "isdbgrid" || request.command == "find") {
    if (shared_.topology) RefreshView();
    if (std::optional<Doc> answer = AnswerAsMongos(request, shared_.topology ? view_.get() : nullptr,
                                                   shared_.backend))
      co_return co_await SendReply(request, *answer);
  }
  if (std::shared_ptr<const RuleSet> rules = shared_.rules.Load(); !rules->empty()) {
    if (std::optional<Command> command = CommandForRules(request, *rules)) {
      if (std::optional<Plan> plan = Rewrite(*command, *rules, capabilities_)) {
        // Every command of a plan goes to the primary (or the transaction's member).
        if (route_) route_->kind = RequestRoute::Kind::kPrimary;
        co_return co_await ExecutePlan(request, *plan);
      }
    }
  }
  // The common path opens no coroutine frame: the member's connection is open.
  Routed routed = Routed::kReady;
  if (!UseOpenBackend()) routed = co_await UseBackend(request);
  switch (routed) {
    case Routed::kReady: break;
    case Routed::kRefused: co_return true;
    case Routed::kLost: co_return false;
  }
  forwarded_at_ = Clock::now();
  if (!co_await backend_->Write(request_)) {
    spdlog::warn("session {}: backend connection lost while sending", id_);
    metrics_->CountConnectionError(ConnectionError::kBackendLost);
    co_return false;
  }
  if (request.more_to_come) co_return true;
  if (request.is_handshake) negotiated_ = request.offered_compressors;
  const bool relayed = co_await RelayReplies(request);
  if (MayDropIndexes(request.command)) shared_.ensured.Clear();
  co_return relayed;
}

awaitable<bool> Session::RelayReplies(const wire::Request& request) {
  int resent = 0;
  for (bool first = true;;) {
    if (co_await backend_->Read(reply_) != ReadStatus::kOk) {
      spdlog::warn("session {}: backend connection lost while awaiting a reply", id_);
      metrics_->CountConnectionError(ConnectionError::kBackendLost);
      co_return false;
    }
    // Handshakes are left out: an awaitable hello waits by design.
    if (!request.is_handshake) {
      if (first) metrics_->backend_roundtrip.Observe(Clock::now() - forwarded_at_);
      if (first && resent < kMaxResends && AnsweredAsFormerPrimary(OpMsgBody(reply_))) {
        ++resent;
        const bool resent_ok = co_await ResendToNewPrimary();
        if (resent_ok) continue;  // its reply is the client's
      }
      const bool failed = GlobalMetrics().CountReplyErrors(OpMsgBody(reply_));
      if (failed) request_failed_ = true;
      if (route_) NoteReply(OpMsgBody(reply_), failed);
    }
    first = false;
    const bool more = HasMoreToCome(reply_);
    ShapeReply(request);
    if (!co_await WriteToClient(reply_)) co_return false;
    if (!more) co_return true;
  }
}

bool Session::AnsweredAsFormerPrimary(std::span<const uint8_t> reply_document) const {
  if (!route_ || !route_->transaction.empty() || backend_address_.empty()) return false;
  std::optional<wire::ReplyErrors> errors = wire::ScanReplyErrors(reply_document);
  // Both codes mean the member ran nothing: sending the command again is
  // what a driver's retry does, without the round trip to the client.
  return errors && errors->failed && errors->code && (*errors->code == 10107 || *errors->code == 13435);
}

awaitable<bool> Session::ResendToNewPrimary() {
  spdlog::info("session {}: {} answered as a former primary; sending the request to the new primary", id_,
               backend_address_);
  shared_.topology->ReportNotPrimary(backend_address_);
  const Routed routed = co_await SelectBackend();
  if (routed != Routed::kReady) co_return false;
  forwarded_at_ = Clock::now();
  const bool sent = co_await backend_->Write(request_);
  co_return sent;
}

void Session::ShapeReply(const wire::Request& request) {
  if (request.is_handshake) {
    if (auto document = wire::HandshakeReplyDocument(reply_))
      UpdateCapabilities(*document, capabilities_);
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
  request_failed_ = true;
  co_return co_await WriteToClient(reply);
}

awaitable<bool> Session::WriteToClient(std::span<const uint8_t> message) {
  metrics_->bytes_sent.Add(message.size());
  co_return co_await client_.Write(message);
}

awaitable<bool> Session::EnsureDirectBackend() {
  for (Link& link : links_) {
    if (link.address.empty()) {
      backend_ = link.stream.get();
      backend_address_.clear();
      co_return true;
    }
  }
  std::unique_ptr<MessageStream> stream = co_await ConnectBackend(shared_.backend, shared_.policy.backend_tls());
  if (!stream) {
    spdlog::warn("session {}: no backend reachable; closing the client connection", id_);
    metrics_->CountConnectionError(ConnectionError::kBackendUnreachable);
    co_return false;
  }
  backend_ = stream.get();
  backend_address_.clear();
  links_.push_back(Link{"", std::move(stream)});
  co_return true;
}

void Session::RefreshView() {
  if (view_ && view_version_ == shared_.topology->version()) return;
  view_version_ = shared_.topology->version();
  view_ = shared_.topology->View();
}

const Member* Session::ChooseMember(const TopologyView& view) const {
  const RequestRoute& route = *route_;
  const uint32_t random = random_;
  auto pinned = [&](const RoutePins& pins, const std::string& key) -> const Member* {
    std::optional<std::string> address = pins.Find(key);
    return address ? view.Find(*address) : nullptr;
  };
  if (view.kind == TopologyKind::kSingle) return SelectForWrite(view, random);
  if (!route.transaction.empty() && !route.starts_transaction) {
    if (const Member* member = pinned(shared_.pins->transactions, route.transaction)) return member;
  }
  switch (route.kind) {
    case RequestRoute::Kind::kCursor:
      if (const Member* member = pinned(shared_.pins->cursors, RoutePins::CursorKey(route.cursor_id)))
        return member;
      return SelectForWrite(view, random);
    case RequestRoute::Kind::kRead:
      return SelectForRead(view, route.preference, random);
    case RequestRoute::Kind::kHandshake:
      if (const Member* member = SelectForWrite(view, random)) return member;
      for (const Member& member : view.members)
        if (member.data_bearing()) return &member;
      return nullptr;
    case RequestRoute::Kind::kPrimary:
      return SelectForWrite(view, random);
  }
  return nullptr;
}

awaitable<bool> Session::UseLink(const Member& member) {
  if (backend_ && backend_address_ == member.address) co_return true;
  for (Link& link : links_) {
    if (link.address == member.address) {
      backend_ = link.stream.get();
      backend_address_ = member.address;
      co_return true;
    }
  }
  std::unique_ptr<MessageStream> stream =
      co_await ConnectBackendHost(member.host, shared_.backend, shared_.policy.backend_tls());
  if (!stream) co_return false;
  backend_ = stream.get();
  backend_address_ = member.address;
  links_.push_back(Link{member.address, std::move(stream)});
  co_return true;
}

bool Session::UseOpenBackend() {
  if (!shared_.topology) {
    if (!backend_) return false;
    return true;
  }
  RefreshView();
  const Member* member = ChooseMember(*view_);
  if (!member) return false;
  if (!backend_ || backend_address_ != member->address) {
    auto open = std::find_if(links_.begin(), links_.end(), [member](const Link& link) {
      return link.address == member->address;
    });
    if (open == links_.end()) return false;
    backend_ = open->stream.get();
    backend_address_ = member->address;
  }
  if (route_->kind != RequestRoute::Kind::kHandshake)
    metrics_->CountRoute(static_cast<size_t>(route_->preference.mode), static_cast<size_t>(member->kind));
  return true;
}

awaitable<Session::Routed> Session::UseBackend(const wire::Request& request) {
  const Routed routed = co_await SelectBackend();
  if (routed != Routed::kRefused) co_return routed;
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
          (view_->set_name.empty() ? "remold backend" : view_->set_name)};
  co_await ReplyWithError(request, refusal);
  co_return Routed::kRefused;
}

awaitable<Session::Routed> Session::SelectBackend() {
  if (!shared_.topology) {
    const bool connected = co_await EnsureDirectBackend();
    co_return connected ? Routed::kReady : Routed::kLost;
  }
  std::optional<Clock::time_point> deadline;  // set once the first choice fails
  for (;;) {
    RefreshView();
    // Held: the member stays valid while its connection opens.
    const std::shared_ptr<const TopologyView> view = view_;
    if (const Member* member = ChooseMember(*view)) {
      const bool linked = co_await UseLink(*member);
      if (linked) {
        if (route_->kind != RequestRoute::Kind::kHandshake)
          metrics_->CountRoute(static_cast<size_t>(route_->preference.mode), static_cast<size_t>(member->kind));
        co_return Routed::kReady;
      }
    } else if (view_->scanned && std::none_of(view_->members.begin(), view_->members.end(),
                                              [](const Member& m) { return m.kind != MemberKind::kUnknown; })) {
      // No server answers the monitor: try the URI's hosts as a direct
      // connection would, which logs why each one fails.
      const bool connected = co_await EnsureDirectBackend();
      co_return connected ? Routed::kReady : Routed::kLost;
    }
    if (!deadline) deadline = Clock::now() + shared_.backend.server_selection_timeout;
    if (Clock::now() >= *deadline) co_return Routed::kRefused;
    const auto executor = co_await asio::this_coro::executor;
    asio::steady_timer pause(executor, std::chrono::milliseconds(view_->scanned ? 20 : 2));
    boost::system::error_code ignored;
    co_await pause.async_wait(asio::redirect_error(use_awaitable, ignored));
  }
}

awaitable<std::optional<Doc>> Session::RoundTripToPrimary(const BackendCommand& command) {
  std::optional<Doc> reply = co_await RoundTrip(command);
  // A member that answers NotWritablePrimary (or, for a read, not
  // secondaryOk) did not run the command: once the monitor finds the new
  // primary it goes there, as a driver retries. Never inside a client's
  // transaction, which lives on its member.
  for (int resent = 0; resent < kMaxResends && reply && AnsweredAsFormerPrimary(reply->bytes()); ++resent) {
    spdlog::info("session {}: {} answered as a former primary; sending a rewritten command to the new primary",
                 id_, backend_address_);
    shared_.topology->ReportNotPrimary(backend_address_);
    const Routed routed = co_await SelectBackend();
    if (routed != Routed::kReady) break;
    reply = co_await RoundTrip(command);
  }
  co_return reply;
}

void Session::NoteReply(std::span<const uint8_t> reply_document, bool failed) {
  const RequestRoute& route = *route_;
  if (failed) {
    std::optional<wire::ReplyErrors> errors = wire::ScanReplyErrors(reply_document);
    if (errors && errors->code && IsNotPrimaryCode(*errors->code) && !backend_address_.empty())
      shared_.topology->ReportNotPrimary(backend_address_);
    return;
  }
  if (!view_ || view_->kind == TopologyKind::kSingle || backend_address_.empty()) return;
  if (route.kind == RequestRoute::Kind::kCursor) {
    if (route.cursor_id != 0 && ReplyCursorId(reply_document) == 0)
      shared_.pins->cursors.Unpin(RoutePins::CursorKey(route.cursor_id));
  } else if (route.may_open_cursor) {
    if (int64_t id = ReplyCursorId(reply_document)) shared_.pins->cursors.Pin(RoutePins::CursorKey(id), backend_address_);
  }
  if (route.starts_transaction && !route.transaction.empty())
    shared_.pins->transactions.Pin(route.transaction, backend_address_);
}

awaitable<std::optional<Doc>> Session::RoundTrip(const BackendCommand& command) {
  std::vector<uint8_t> message = EncodeBackendCommand(command, next_backend_id_++);
  const Clock::time_point sent = Clock::now();
  if (!co_await backend_->Write(message) || co_await backend_->Read(reply_) != ReadStatus::kOk) {
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

awaitable<bool> Session::SendReply(const wire::Request& request, const Doc& reply) {
  if (request.more_to_come) co_return true;  // the client asked for no reply
  std::vector<uint8_t> message = wire::EncodeOpMsg(next_reply_id_++, request.header.request_id, 0,
                                                   reply.bytes());
  if (request.compressor) message = wire::CompressMessage(message, *request.compressor);
  if (GlobalMetrics().CountReplyErrors(reply.bytes())) request_failed_ = true;
  co_return co_await WriteToClient(message);
}

awaitable<bool> Session::ExecutePlan(const wire::Request& request, Plan& plan) {
  rule_metrics_ = &GlobalMetrics().ForRule(plan.rule);
  rule_metrics_->rewrites.Add();
  const Clock::time_point started = Clock::now();
  const bool kept = co_await RunPlan(request, plan);
  rule_metrics_->seconds.Observe(Clock::now() - started);
  if (!kept || request_failed_) rule_metrics_->errors.Add();
  co_return kept;
}

awaitable<bool> Session::RunPlan(const wire::Request& request, Plan& plan) {
  if (plan.immediate_reply) {
    spdlog::debug("session {}: rule {} answered {} itself", id_, plan.rule, request.command);
    co_return co_await SendReply(request, *plan.immediate_reply);
  }
  // The common path opens no coroutine frame: the member's connection is open.
  Routed routed = Routed::kReady;
  if (!UseOpenBackend()) routed = co_await UseBackend(request);
  switch (routed) {
    case Routed::kReady: break;
    case Routed::kRefused: co_return true;
    case Routed::kLost: co_return false;
  }
  std::optional<Doc> failed;
  if (!co_await EnsurePrerequisites(plan, failed)) co_return false;
  if (failed) co_return co_await SendReply(request, *failed);
  const std::string rule = plan.rule;
  std::optional<ShapedReply> shaped = co_await RunCommands(request, std::move(plan));
  if (!shaped) co_return false;
  if (!shaped->warnings.empty()) {
    // The details quote backend errors and values of documents: only at debug.
    request_failed_ = true;
    spdlog::warn("session {}: rule {}: {} follow-up(s) failed after the client's {}; run `remold "
                 "reconcile` to repair them (details at log level debug)",
                 id_, rule, shaped->warnings.size(), request.command);
    for (const std::string& warning : shaped->warnings)
      spdlog::debug("session {}: rule {}: {}", id_, rule, warning);
  }
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
    if (!IsOkReply(*reply)) {
      // errmsg may quote a document (a duplicate key): only at debug.
      spdlog::warn("session {}: rule {}: prerequisite failed: code {} {}", id_, plan.rule,
                   FindInteger(reply->get(), "code").value_or(0),
                   FindString(reply->get(), "codeName").value_or("(no codeName)"));
      spdlog::debug("session {}: rule {}: prerequisite failed: {}", id_, plan.rule,
                    FindString(reply->get(), "errmsg").value_or("unknown error"));
      failed = std::move(reply);
      co_return true;
    }
    shared_.ensured.Add(key);
  }
  co_return true;
}

awaitable<std::optional<ShapedReply>> Session::RunCommands(const wire::Request& request,
                                                           Plan plan) {
  PlanRunner runner(std::move(plan));
  while (const BackendCommand* command = runner.Next()) {
    if (spdlog::should_log(spdlog::level::debug))
      spdlog::debug("session {}: rule {}: sends {}", id_, runner.plan().rule,
                    FoldedCommand(*command).ToRelaxedJson());
    std::optional<Doc> reply = co_await RoundTripToPrimary(*command);
    if (!reply) {
      spdlog::warn("session {}: backend connection lost during a rewritten {}", id_,
                   request.command);
      co_return std::nullopt;
    }
    runner.Accept(std::move(*reply));
  }
  if (MayDropIndexes(request.command) && !runner.refused()) shared_.ensured.Clear();
  co_return runner.Finish();
}

void Session::ReleaseLargeBuffers() {
  if (request_.capacity() > kRetainedBufferSize) std::vector<uint8_t>().swap(request_);
  if (reply_.capacity() > kRetainedBufferSize) std::vector<uint8_t>().swap(reply_);
}

}  // namespace remold
