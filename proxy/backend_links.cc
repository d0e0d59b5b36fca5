#include "proxy/backend_links.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "proxy/backend_connector.h"
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
  if (!authenticated_) return false;
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
  links_.push_back(Link{address, std::move(stream), std::chrono::steady_clock::now()});
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
  links_.push_back(Link{"", std::move(stream), std::chrono::steady_clock::now()});
  co_return true;
}

void BackendLinks::NoteReply(const RequestRoute& route, std::span<const uint8_t> reply_document,
                             const std::optional<wire::ReplyErrors>& errors) {
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

void BackendLinks::NoteSending(bool authenticates) {
  if (authenticates && !authenticated_) authenticated_ = current_address_;
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
  if (!any_compressor_) return std::nullopt;  // no search on the common path
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
}

}  // namespace remold
