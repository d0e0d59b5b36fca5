// A session's connections to the backend: one per member it has talked to,
// and which one the request in progress uses.
//
// With directConnection=true there is one connection, to the URI's hosts
// in order (first reachable wins). Otherwise each request's RequestRoute
// (proxy/routing/request_route.h) picks the member from the topology monitor's
// latest view, through the cursor and transaction pins shared by all
// sessions, and the connection to that member is opened on first use.
// When no member is eligible, Use() waits for one up to the backend's
// serverSelectionTimeoutMS; when no server answers the monitor at all, it
// connects as directConnection=true would, which logs why each host fails.
//
// Authentication pins the session: a client's credentials live on the one
// backend connection its conversation ran on (remold cannot replay it on
// another), so every later request goes there. Reads are then served by
// that member whatever their preference; a request that needs the primary
// once that member is no longer the primary ends the session, so the
// driver reconnects, authenticates again and retries.
//
// A connection idle for a second or more is checked before reuse: one the
// backend closed meanwhile (a restart) is replaced by a fresh one, or ends
// the session when it carried the client's credentials. The connection that
// carries them is also checked while the client is idle
// (CredentialsLostWhileIdle), so such a session ends before its client sends
// a request into it.
//
// Pooled mode (Shared::pool set, proxy/backend_pool.h): the session owns no
// connection between requests. Use() borrows one of the chosen member's
// pooled connections authenticated as the client (a login conversation
// borrows an unauthenticated one, which then carries the client's
// identity), and FinishRequest() gives it back, unless a pin keeps it
// (proxy/routing/connection_pins.h): a login in progress, or a command tied
// to the connection. A transaction's connection is parked in the pool for
// its next statement, whichever client connection of this worker brings
// it; a cursor's getMore and killCursors borrow the connection that opened
// it (waiting for it if another client has it for a request). When the member has no connection
// of the client's identity left (the backend restarted), the session ends
// as above, and its driver logs in again.
//
// Lives on its session's worker thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "proxy/asio.h"
#include "proxy/backend_link.h"
#include "proxy/backend_pool.h"
#include "proxy/connection_policy.h"
#include "proxy/message_stream.h"
#include "proxy/routing/connection_pins.h"
#include "proxy/routing/request_route.h"
#include "proxy/routing/route_pins.h"
#include "proxy/routing/topology_monitor.h"
#include "proxy/wire/backend_uri.h"
#include "proxy/wire/compression.h"
#include "proxy/wire/reply_errors.h"
#include "proxy/wire/request.h"

namespace remold {

class BackendLinks {
 public:
  struct Shared {
    const BackendOptions& backend;
    const ConnectionPolicy& policy;  // the backend's TLS
    TopologyMonitor* topology;       // null with directConnection=true
    RoutingPins* pins;               // with `topology`
    std::shared_ptr<BackendPool> pool;  // the worker's, in pooled mode
  };
  // kPoolTimeout: pooled mode, no connection was free within the pool's
  // wait timeout.
  enum class Choice { kReady, kNoMember, kLost, kPoolTimeout };

  BackendLinks(Shared shared, uint64_t session_id);
  ~BackendLinks();

  bool pooled() const { return shared_.pool != nullptr; }

  bool monitored() const { return shared_.topology != nullptr; }

  // Makes current() the connection `route` goes to when it is open
  // already: no waiting, no connecting, no coroutine. `route` is ignored
  // (may be empty) when not monitored.
  bool UseOpen(const std::optional<RequestRoute>& route);
  // The same, connecting and waiting as the header says. kNoMember: none
  // came within serverSelectionTimeoutMS; kLost: no connection could be
  // opened (logged).
  awaitable<Choice> Use(const std::optional<RequestRoute>& route);

  MessageStream& current() { return *current_; }
  // The member of current(): "" for a direct connection.
  const std::string& current_address() const { return current_address_; }
  MemberKind current_kind() const { return current_kind_; }

  // The monitor's latest view (refreshed when it changed); null when not
  // monitored.
  const TopologyView* view();

  // After a reply relayed from current(): pins the cursor or transaction
  // it opened, unpins an exhausted cursor, and reports a member answering
  // as a former primary.
  // `errors` is the reply's scan (proxy/wire/reply_errors.h).
  void NoteReply(const RequestRoute& route, std::span<const uint8_t> reply_document,
                 const std::optional<wire::ReplyErrors>& errors);
  // Whether a reply says current() is no longer the primary and ran
  // nothing (NotWritablePrimary, NotPrimaryNoSecondaryOk), outside a
  // transaction: the request may be sent again to the new primary.
  bool AnsweredAsFormerPrimary(const std::optional<RequestRoute>& route,
                               const std::optional<wire::ReplyErrors>& errors) const;
  // Tells the monitor that current() answered as a former primary.
  void ReportFormerPrimary();
  // Whether the client authenticated on one of these connections.
  bool authenticated() const { return authenticated_.has_value(); }
  // Call before sending a client's request on current(): `authenticates`
  // when it is part of an authentication conversation (IsAuthentication).
  // Sets the pins of pooled mode.
  void NoteSending(const wire::Request& request, const std::optional<RequestRoute>& route, bool authenticates);
  // Pooled mode, after the reply a client was sent (relayed, or shaped by a
  // rule's plan): pins or unpins its cursor, ends a login.
  void NotePooledReply(const RequestRoute& route, std::span<const uint8_t> reply_document,
                       const std::optional<wire::ReplyErrors>& errors);
  // Pooled mode: a reply stream (moreToCome) holds current() until it ends.
  void NoteExhaust();
  // Pooled mode, after each request the client was answered: current() goes
  // back to the pool unless a pin keeps it. No-op otherwise (inline: every
  // request of the pass-through path calls it).
  void FinishRequest() {
    if (held_) GiveBack();
  }

  // Compression on current() (proxy/wire/backend_compression.h): whether it has
  // not had the session's offer yet; what it compresses with (nullopt:
  // nothing); the answer to the offer.
  bool needs_compression_offer() const;
  std::optional<wire::Compressor> compressor() const;
  void NoteCompressionChosen(std::optional<wire::Compressor> chosen);

  // Whether the connection that carries the client's credentials has been
  // idle for a second or more and was closed by the backend meanwhile (it
  // is then closed here too). A non-blocking peek; false when the client
  // never authenticated. For a session between requests.
  bool CredentialsLostWhileIdle();

  // Closes every connection (the objects stay: a request may be waiting on
  // one). Then DiscardHeld() once nothing uses them, in pooled mode.
  void CloseAll();
  void DiscardHeld();

 private:
  using Link = BackendLink;
  Link* CurrentLink();
  const Link* CurrentLink() const;
  enum class Found { kUsed, kNone, kLost };  // kLost: it was dead and carried credentials

  // Null when no member fits now; sets must_end_ when none ever will for
  // this session (authenticated elsewhere than the primary it needs).
  const Member* Choose(const TopologyView& view, const RequestRoute& route);
  Found UseOpenLink(const std::string& address, MemberKind kind);
  // Whether `link`, idle since a second or more, was closed by the backend;
  // if so it is logged, closed and erased (invalidating `link`).
  bool DropIfClosedWhileIdle(std::vector<Link>::iterator link, std::chrono::steady_clock::time_point now);
  awaitable<bool> Connect(const Member& member);
  awaitable<bool> ConnectDirect();
  // Closes and forgets the links `superseded` picks (a direct link once a
  // member is known, member links while none is), but never the one that
  // carries the client's credentials.
  void DropLinks(const std::function<bool(const Link&)>& superseded);

  // Pooled mode (see the header).
  awaitable<Choice> UsePooled(const std::optional<RequestRoute>& route);
  bool UseOpenPooled(const std::optional<RequestRoute>& route);
  // The pooled connection `route` may use: who it must be authenticated as
  // and, for a cursor's request, which connection.
  const std::string& IdentityFor(const std::optional<RequestRoute>& route) const;
  std::optional<uint64_t> SerialFor(const std::optional<RequestRoute>& route) const;
  void Hold(std::unique_ptr<BackendLink> link, MemberKind kind);
  // Gives current() back to the pool unless a pin keeps it.
  void LetGoUnpinned();
  // FinishRequest's work: parks a transaction's connection, or returns it.
  void GiveBack();
  // Records (or forgets) that a cursor's requests go to the connection
  // `serial`, and tells the pool, which then keeps it open.
  void PinCursor(int64_t cursor, uint64_t serial);
  void UnpinCursor(int64_t cursor);
  // Holds the connection parked for the request's transaction, if any.
  bool UseParked(const std::optional<RequestRoute>& route);
  void Pin(PinReason reason);

  Shared shared_;
  const uint64_t session_id_;
  const uint32_t random_;  // spreads sessions over equally eligible members
  std::vector<Link> links_;
  MessageStream* current_ = nullptr;
  std::string current_address_;
  MemberKind current_kind_ = MemberKind::kUnknown;
  std::shared_ptr<const TopologyView> view_;
  uint64_t view_version_ = 0;
  std::optional<std::string> authenticated_;  // the address of the authenticated link
  bool must_end_ = false;                      // the session cannot be served any more
  bool any_compressor_ = false;                // some link compresses

  // Pooled mode.
  std::unique_ptr<BackendLink> held_;  // borrowed from the pool (current())
  std::optional<PinReason> pin_;       // keeps held_ across requests
  std::string identity_;               // the client's login key; "" before one
  std::optional<std::string> login_;   // the key a login in progress gives
  bool login_ends_on_ok_ = false;      // `authenticate`: one round trip
  std::string transaction_;             // the request in progress's (its lsid)
  bool ends_transaction_ = false;      // it commits or aborts it
  std::set<std::string> parked_;       // transactions whose connection this client parked
  std::unordered_map<int64_t, uint64_t> cursor_links_;  // cursor id -> its connection
};

}  // namespace remold
