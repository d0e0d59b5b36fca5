#include "proxy/backend_links.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "proxy/backend_connector.h"
#include "proxy/wire/login_identity.h"
#include "proxy/wire/reply_errors.h"

namespace remold {

namespace {

// A connection unused for this long is checked before it is used again.
constexpr std::chrono::seconds kIdleCheckAfter{1};

// The address of the one link with directConnection=true.
const std::string kDirectAddress;

// splitmix64's finaliser: consecutive session ids give unrelated draws.
uint32_t Scramble(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return static_cast<uint32_t>((x ^ (x >> 31)) >> 32);
}

}  // namespace

BackendLinks::BackendLinks(Shared shared, uint64_t session_id)
    : shared_(shared), session_id_(session_id), random_(Scramble(session_id)) {}

BackendLinks::~BackendLinks() { DiscardHeld(); }

const TopologyView* BackendLinks::view() {
  if (!shared_.topology) return nullptr;
  if (!view_ || view_version_ != shared_.topology->version()) {
    view_version_ = shared_.topology->version();
    view_ = shared_.topology->View();
  }
  return view_.get();
}

const Member* BackendLinks::Choose(const TopologyView& view, const RequestRoute& route) {
  if (authenticated_) {
    const Member* member = view.Find(*authenticated_);
    if (!member || !member->data_bearing()) return nullptr;  // until the monitor sees it again
    const bool replica_set = view.kind == TopologyKind::kReplicaSetWithPrimary ||
                             view.kind == TopologyKind::kReplicaSetNoPrimary;
    if (!replica_set || member->kind == MemberKind::kPrimary || route.kind == RequestRoute::Kind::kRead)
      return member;
    must_end_ = true;  // the primary is elsewhere now, and the credentials are not
    return nullptr;
  }
  auto pinned = [&view](const RoutePins& pins, const std::string& key) -> const Member* {
    std::optional<std::string> address = pins.Find(key);
    return address ? view.Find(*address) : nullptr;
  };
  if (view.kind == TopologyKind::kSingle) return SelectForWrite(view, random_);
  if (!route.transaction.empty() && !route.starts_transaction) {
    if (const Member* member = pinned(shared_.pins->transactions, route.transaction)) return member;
  }
  switch (route.kind) {
    case RequestRoute::Kind::kCursor:
      if (const Member* member = pinned(shared_.pins->cursors, RoutePins::CursorKey(route.cursor_id)))
        return member;
      return SelectForWrite(view, random_);
    case RequestRoute::Kind::kRead:
      return SelectForRead(view, route.preference, random_);
    case RequestRoute::Kind::kHandshake:
      if (const Member* member = SelectForWrite(view, random_)) return member;
      for (const Member& member : view.members)
        if (member.data_bearing()) return &member;
      return nullptr;
    case RequestRoute::Kind::kPrimary:
      return SelectForWrite(view, random_);
  }
  return nullptr;
}

bool BackendLinks::DropIfClosedWhileIdle(std::vector<Link>::iterator link,
                                         std::chrono::steady_clock::time_point now) {
  if (now - link->last_used < kIdleCheckAfter || !link->stream->PeerClosed()) return false;
  const bool carried_credentials = authenticated_ && *authenticated_ == link->address;
  spdlog::info("session {}: backend {} closed the connection while it was idle{}", session_id_,
               link->address.empty() ? "(direct)" : link->address,
               carried_credentials ? "; it carried the client's credentials: closing the client connection"
                                   : "; opening a new one");
  link->stream->Close();
  if (current_ == link->stream.get()) {
    current_ = nullptr;
    current_address_.clear();
  }
  links_.erase(link);
  return true;
}

bool BackendLinks::CredentialsLostWhileIdle() {
  // Pooled: nothing is held between requests but by a pin, and the pool
  // checks its idle connections.
  if (!authenticated_ || pooled()) return false;
  auto link = std::find_if(links_.begin(), links_.end(),
                           [this](const Link& l) { return l.address == *authenticated_; });
  return link != links_.end() && DropIfClosedWhileIdle(link, std::chrono::steady_clock::now());
}

BackendLinks::Found BackendLinks::UseOpenLink(const std::string& address, MemberKind kind) {
  auto link = std::find_if(links_.begin(), links_.end(), [&address](const Link& l) { return l.address == address; });
  if (link == links_.end()) return Found::kNone;
  const auto now = std::chrono::steady_clock::now();
  if (DropIfClosedWhileIdle(link, now))
    return authenticated_ && *authenticated_ == address ? Found::kLost : Found::kNone;
  link->last_used = now;
  if (current_ != link->stream.get()) {  // the same link as the last request's, most often
    current_ = link->stream.get();
    current_address_ = address;
  }
  current_kind_ = kind;
  return Found::kUsed;
}

bool BackendLinks::UseOpen(const std::optional<RequestRoute>& route) {
  if (must_end_) return false;
  if (pooled()) return UseOpenPooled(route);
  if (!shared_.topology) {
    if (!current_) return false;
    const Found found = UseOpenLink(kDirectAddress, MemberKind::kUnknown);
    must_end_ = found == Found::kLost;
    return found == Found::kUsed;
  }
  const TopologyView* now = view();
  const Member* member = Choose(*now, *route);
  if (!member) return false;
  const Found found = UseOpenLink(member->address, member->kind);
  must_end_ = found == Found::kLost;
  return found == Found::kUsed;
}

awaitable<BackendLinks::Choice> BackendLinks::Use(const std::optional<RequestRoute>& route) {
  using Clock = std::chrono::steady_clock;
  if (must_end_) co_return Choice::kLost;
  if (pooled()) co_return co_await UsePooled(route);
  if (!shared_.topology) {
    if (authenticated_) co_return Choice::kLost;  // its credentials went with the old connection
    const bool connected = co_await ConnectDirect();
    co_return connected ? Choice::kReady : Choice::kLost;
  }
  std::optional<Clock::time_point> deadline;  // set once the first choice fails
  for (;;) {
    view();
    // Held: the member stays valid while its connection opens.
    const std::shared_ptr<const TopologyView> held = view_;
    const Member* member = Choose(*held, *route);
    if (must_end_) co_return Choice::kLost;
    if (member) {
      const Found found = UseOpenLink(member->address, member->kind);
      if (found == Found::kUsed) co_return Choice::kReady;
      if (found == Found::kLost || authenticated_) {
        must_end_ = true;  // a new connection would not carry the credentials
        co_return Choice::kLost;
      }
      const bool connected = co_await Connect(*member);
      if (connected) co_return Choice::kReady;
    } else if (held->scanned && std::none_of(held->members.begin(), held->members.end(), [](const Member& m) {
                 return m.kind != MemberKind::kUnknown;
               })) {
      // No server answers the monitor: connect as directConnection=true
      // would, which logs why each host fails.
      const bool connected = co_await ConnectDirect();
      co_return connected ? Choice::kReady : Choice::kLost;
    }
    if (!deadline) deadline = Clock::now() + shared_.backend.server_selection_timeout;
    if (Clock::now() >= *deadline) co_return Choice::kNoMember;
    const auto executor = co_await asio::this_coro::executor;
    SteadyTimer pause(executor, std::chrono::milliseconds(held->scanned ? 20 : 2));
    boost::system::error_code ignored;
    co_await pause.async_wait(asio::redirect_error(use_awaitable, ignored));
  }
}

awaitable<bool> BackendLinks::Connect(const Member& member) {
  // Copied: the caller's view may be replaced while the connection opens.
  const std::string address = member.address;
  const MemberKind kind = member.kind;
  std::unique_ptr<MessageStream> stream =
      co_await ConnectBackendHost(member.host, shared_.backend, shared_.policy.backend_tls());
  if (!stream) co_return false;
  // A direct link opened while the monitor knew no member is not used again
  // now that it knows one.
  DropLinks([](const Link& link) { return link.address.empty(); });
  current_ = stream.get();
  current_address_ = address;
  current_kind_ = kind;
  links_.push_back(Link{.address = address, .stream = std::move(stream), .last_used = std::chrono::steady_clock::now()});
  co_return true;
}

awaitable<bool> BackendLinks::ConnectDirect() {
  const Found found = UseOpenLink(kDirectAddress, MemberKind::kUnknown);
  if (found == Found::kUsed) co_return true;
  if (found == Found::kLost) {
    must_end_ = true;
    co_return false;
  }
  std::unique_ptr<MessageStream> stream = co_await ConnectBackend(shared_.backend, shared_.policy.backend_tls());
  if (!stream) {
    spdlog::warn("session {}: no backend reachable; closing the client connection", session_id_);
    co_return false;
  }
  // The monitor knows no member: links to members are not used until it
  // does, and a member that comes back gets a new one.
  DropLinks([](const Link& link) { return !link.address.empty(); });
  current_ = stream.get();
  current_address_.clear();
  current_kind_ = MemberKind::kUnknown;
  links_.push_back(Link{.address = "", .stream = std::move(stream), .last_used = std::chrono::steady_clock::now()});
  co_return true;
}

void BackendLinks::NoteReply(const RequestRoute& route, std::span<const uint8_t> reply_document,
                             const std::optional<wire::ReplyErrors>& errors) {
  if (pooled()) NotePooledReply(route, reply_document, errors);
  if (current_address_.empty() || !errors) return;
  if (errors->failed) {
    if (errors->code && IsNotPrimaryCode(*errors->code)) ReportFormerPrimary();
    return;
  }
  if (!view_ || view_->kind == TopologyKind::kSingle) return;
  if (route.kind == RequestRoute::Kind::kCursor) {
    if (route.cursor_id != 0 && ReplyCursorId(reply_document) == 0)
      shared_.pins->cursors.Unpin(RoutePins::CursorKey(route.cursor_id));
  } else if (route.may_open_cursor) {
    if (int64_t id = ReplyCursorId(reply_document))
      shared_.pins->cursors.Pin(RoutePins::CursorKey(id), current_address_);
  }
  if (route.starts_transaction && !route.transaction.empty())
    shared_.pins->transactions.Pin(route.transaction, current_address_);
}

void BackendLinks::NoteSending(const wire::Request& request, const std::optional<RequestRoute>& route,
                               bool authenticates) {
  if (!pooled()) {
    if (authenticates && !authenticated_) authenticated_ = current_address_;
    return;
  }
  // A pooled connection never takes a client's speculativeAuthenticate
  // (wire::SharedLinkHello): the driver logs in with saslStart after.
  if (request.is_handshake) return;
  transaction_.clear();
  ends_transaction_ = false;
  if (route && !route->transaction.empty()) {
    transaction_ = route->transaction;
    ends_transaction_ = EndsTransaction(request);
    if (route->starts_transaction) shared_.pool->CountPin(PinReason::kTransaction);
  }
  if (authenticates) {
    if (!authenticated_) authenticated_ = current_address_;  // the member of the client's login
    if (request.command == "saslContinue") return;
    login_ = wire::LoginIdentity(request.command_document);
    login_ends_on_ok_ = request.command == "authenticate";
    // A login remold cannot key keeps its connection for good.
    Pin(login_ ? PinReason::kAuthentication : PinReason::kConnection);
    return;
  }
  if (IsConnectionScoped(request)) Pin(PinReason::kConnection);
}

bool BackendLinks::AnsweredAsFormerPrimary(const std::optional<RequestRoute>& route,
                                           const std::optional<wire::ReplyErrors>& errors) const {
  if (!route || !route->transaction.empty() || current_address_.empty()) return false;
  // Both codes mean the member ran nothing: sending the command again is
  // what a driver's retry does, without the round trip to the client.
  return errors && errors->failed && errors->code && (*errors->code == 10107 || *errors->code == 13435);
}

void BackendLinks::ReportFormerPrimary() {
  if (shared_.topology && !current_address_.empty()) shared_.topology->ReportNotPrimary(current_address_);
}

const BackendLinks::Link* BackendLinks::CurrentLink() const {
  if (held_) return held_.get();
  for (const Link& link : links_)
    if (link.stream.get() == current_) return &link;
  return nullptr;
}

BackendLinks::Link* BackendLinks::CurrentLink() {
  return const_cast<Link*>(static_cast<const BackendLinks*>(this)->CurrentLink());
}

bool BackendLinks::needs_compression_offer() const {
  const Link* link = CurrentLink();
  return link && !link->compression_offered;
}

std::optional<wire::Compressor> BackendLinks::compressor() const {
  if (!any_compressor_ && !held_) return std::nullopt;  // no search on the common path
  const Link* link = CurrentLink();
  return link ? link->compressor : std::nullopt;
}

void BackendLinks::NoteCompressionChosen(std::optional<wire::Compressor> chosen) {
  if (Link* link = CurrentLink()) {
    link->compression_offered = true;
    link->compressor = chosen;
    any_compressor_ = any_compressor_ || chosen.has_value();
  }
}

void BackendLinks::DropLinks(const std::function<bool(const Link&)>& superseded) {
  std::erase_if(links_, [&](const Link& link) {
    if (!superseded(link) || (authenticated_ && *authenticated_ == link.address)) return false;
    if (current_ == link.stream.get()) {
      current_ = nullptr;
      current_address_.clear();
    }
    link.stream->Close();
    return true;
  });
}

void BackendLinks::CloseAll() {
  for (Link& link : links_) link.stream->Close();
  if (held_) held_->stream->Close();
}

void BackendLinks::DiscardHeld() {
  if (!pooled()) return;
  for (const auto& [cursor, serial] : cursor_links_) shared_.pool->DropAffinity(serial);
  cursor_links_.clear();
  // Transactions this client left open: their connections serve again.
  for (const std::string& transaction : parked_) shared_.pool->Unpark(transaction);
  parked_.clear();
  if (!held_) return;
  current_ = nullptr;
  current_address_.clear();
  shared_.pool->Discard(std::move(held_));
}

// Pooled mode.

const std::string& BackendLinks::IdentityFor(const std::optional<RequestRoute>& route) const {
  static const std::string kNobody;
  // A hello needs no privilege: any connection answers it (its
  // speculativeAuthenticate never reaches a pooled one).
  if (route && route->kind == RequestRoute::Kind::kHandshake) return BackendPool::kAnyone;
  // A login borrows an unauthenticated connection, which then carries it.
  return route && route->authenticates ? kNobody : identity_;
}

std::optional<uint64_t> BackendLinks::SerialFor(const std::optional<RequestRoute>& route) const {
  if (!route) return std::nullopt;
  if (route->kind == RequestRoute::Kind::kCursor) {
    auto pinned = cursor_links_.find(route->cursor_id);
    if (pinned != cursor_links_.end()) return pinned->second;
  }
  return std::nullopt;
}

void BackendLinks::PinCursor(int64_t cursor, uint64_t serial) {
  auto [it, added] = cursor_links_.try_emplace(cursor, serial);
  if (!added) {
    if (it->second == serial) return;
    shared_.pool->DropAffinity(it->second);
    it->second = serial;
  }
  shared_.pool->HoldAffinity(serial);
}

void BackendLinks::UnpinCursor(int64_t cursor) {
  auto it = cursor_links_.find(cursor);
  if (it == cursor_links_.end()) return;
  shared_.pool->DropAffinity(it->second);
  cursor_links_.erase(it);
}

void BackendLinks::Hold(std::unique_ptr<BackendLink> link, MemberKind kind) {
  spdlog::trace("session {}: pooled connection #{} ({})", session_id_, link->serial,
                link->identity.empty() ? "no login" : "logged in");
  held_ = std::move(link);
  current_ = held_->stream.get();
  current_address_ = held_->address;
  current_kind_ = kind;
}

void BackendLinks::Pin(PinReason reason) {
  if (pin_ == reason) return;
  pin_ = reason;
  shared_.pool->CountPin(reason);
}

void BackendLinks::NoteExhaust() {
  if (pooled()) shared_.pool->CountPin(PinReason::kExhaust);
}

bool BackendLinks::UseParked(const std::optional<RequestRoute>& route) {
  if (!route || route->transaction.empty()) return false;
  std::unique_ptr<BackendLink> parked = shared_.pool->TakeParked(route->transaction);
  if (!parked) return false;
  parked_.erase(route->transaction);
  const MemberKind kind = current_kind_;
  Hold(std::move(parked), kind);
  return true;
}

void BackendLinks::LetGoUnpinned() {
  if (!held_ || pin_) return;
  current_ = nullptr;
  current_address_.clear();
  shared_.pool->Return(std::move(held_));
}

bool BackendLinks::UseOpenPooled(const std::optional<RequestRoute>& route) {
  LetGoUnpinned();  // a request sent again (a former primary) is routed again
  if (held_) return true;  // pinned: every request goes there
  if (UseParked(route)) return true;
  const Member* member = nullptr;
  if (shared_.topology) {
    member = Choose(*view(), *route);
    if (!member) return false;
  }
  const std::string& address = member ? member->address : kDirectAddress;
  std::unique_ptr<BackendLink> link = shared_.pool->TryTake(address, IdentityFor(route), SerialFor(route));
  if (!link) return false;
  Hold(std::move(link), member ? member->kind : MemberKind::kUnknown);
  return true;
}

awaitable<BackendLinks::Choice> BackendLinks::UsePooled(const std::optional<RequestRoute>& route) {
  using Clock = std::chrono::steady_clock;
  LetGoUnpinned();  // a request sent again (a former primary) is routed again
  if (held_ || UseParked(route)) co_return Choice::kReady;
  std::optional<Clock::time_point> deadline;  // set once the first choice fails
  for (;;) {
    std::shared_ptr<const TopologyView> held_view;  // keeps `member` valid
    const Member* member = nullptr;
    bool direct = !shared_.topology;
    if (shared_.topology) {
      view();
      held_view = view_;
      member = Choose(*held_view, *route);
      if (must_end_) co_return Choice::kLost;
      // No server answers the monitor: as directConnection=true would.
      direct = !member && held_view->scanned &&
               std::none_of(held_view->members.begin(), held_view->members.end(),
                            [](const Member& m) { return m.kind != MemberKind::kUnknown; });
    }
    if (member || direct) {
      const std::string address = member ? member->address : kDirectAddress;
      const MemberKind kind = member ? member->kind : MemberKind::kUnknown;
      const std::optional<HostAndPort> host = member ? std::optional<HostAndPort>(member->host) : std::nullopt;
      const std::optional<uint64_t> serial = SerialFor(route);
      BackendPool::Grant grant = co_await shared_.pool->Take(address, IdentityFor(route), serial);
      switch (grant.outcome) {
        case BackendPool::Outcome::kTaken:
          Hold(std::move(grant.link), kind);
          co_return Choice::kReady;
        case BackendPool::Outcome::kOpen: {
          // One co_await per statement (g++ 12).
          std::unique_ptr<MessageStream> stream;
          if (host)
            stream = co_await ConnectBackendHost(*host, shared_.backend, shared_.policy.backend_tls());
          else
            stream = co_await ConnectBackend(shared_.backend, shared_.policy.backend_tls());
          if (!stream) {
            shared_.pool->Abandon(address);
            if (direct) {
              spdlog::warn("session {}: no backend reachable; closing the client connection", session_id_);
              co_return Choice::kLost;
            }
            break;  // waits for the member below, as an unpooled session does
          }
          auto link = std::make_unique<BackendLink>();
          link->address = address;
          link->stream = std::move(stream);
          link->last_used = Clock::now();
          shared_.pool->Opened(*link);
          Hold(std::move(link), kind);
          co_return Choice::kReady;
        }
        case BackendPool::Outcome::kGone:
          if (serial) {
            // The cursor's connection is closed: any of the client's will do
            // (the server keeps cursors by session and user, not connection).
            UnpinCursor(route->cursor_id);
            continue;
          }
          spdlog::info("session {}: no pooled connection to {} carries the client's login any more; "
                       "closing the client connection so its driver logs in again",
                       session_id_, address.empty() ? "(direct)" : address);
          must_end_ = true;
          co_return Choice::kLost;
        case BackendPool::Outcome::kTimeout:
          co_return Choice::kPoolTimeout;
      }
    }
    if (!deadline) deadline = Clock::now() + shared_.backend.server_selection_timeout;
    if (Clock::now() >= *deadline) co_return Choice::kNoMember;
    const auto executor = co_await asio::this_coro::executor;
    SteadyTimer pause(executor, std::chrono::milliseconds(held_view && held_view->scanned ? 20 : 2));
    boost::system::error_code ignored;
    co_await pause.async_wait(asio::redirect_error(use_awaitable, ignored));
  }
}

void BackendLinks::NotePooledReply(const RequestRoute& route, std::span<const uint8_t> reply_document,
                                   const std::optional<wire::ReplyErrors>& errors) {
  if (!held_) return;
  const bool failed = !errors || errors->failed;

  if (pin_ == PinReason::kAuthentication) {
    if (failed) {
      // The conversation is over and logged no one in: the connection is
      // as unauthenticated as before.
      login_.reset();
      pin_.reset();
    } else if (login_ends_on_ok_ || wire::ConversationDone(reply_document)) {
      spdlog::debug("session {}: logged in on pooled connection #{}", session_id_, held_->serial);
      shared_.pool->Retag(*held_, *login_);
      identity_ = *login_;
      login_.reset();
      pin_.reset();
    }
    return;
  }
  if (route.kind == RequestRoute::Kind::kCursor) {
    const bool ended = failed ? errors && errors->code == 43  // CursorNotFound
                              : ReplyCursorId(reply_document) == 0;
    if (ended) UnpinCursor(route.cursor_id);
  } else if (route.may_open_cursor && !failed) {
    if (const int64_t id = ReplyCursorId(reply_document)) {
      PinCursor(id, held_->serial);
      shared_.pool->CountPin(PinReason::kCursor);
    }
  }
}

void BackendLinks::GiveBack() {
  if (pin_) return;
  current_ = nullptr;
  current_address_.clear();
  if (!transaction_.empty() && !ends_transaction_) {
    // The transaction's next statement gets it back; nobody else meanwhile.
    shared_.pool->Park(transaction_, std::move(held_));
    parked_.insert(transaction_);
    return;
  }
  if (ends_transaction_) parked_.erase(transaction_);
  shared_.pool->Return(std::move(held_));
}

}  // namespace remold
