// A session's connections to the backend: one per member it has talked to,
// and which one the request in progress uses.
//
// With directConnection=true there is one connection, to the URI's hosts
// in order (first reachable wins). Otherwise each request's RequestRoute
// (proxy/request_route.h) picks the member from the topology monitor's
// latest view, through the cursor and transaction pins shared by all
// sessions, and the connection to that member is opened on first use.
// When no member is eligible, Use() waits for one up to the backend's
// serverSelectionTimeoutMS; when no server answers the monitor at all, it
// connects as directConnection=true would, which logs why each host fails.
//
// Lives on its session's worker thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "proxy/asio.h"
#include "proxy/backend_uri.h"
#include "proxy/connection_policy.h"
#include "proxy/message_stream.h"
#include "proxy/request_route.h"
#include "proxy/route_pins.h"
#include "proxy/topology_monitor.h"

namespace remold {

class BackendLinks {
 public:
  struct Shared {
    const BackendOptions& backend;
    const ConnectionPolicy& policy;  // the backend's TLS
    TopologyMonitor* topology;       // null with directConnection=true
    RoutingPins* pins;               // with `topology`
  };
  enum class Choice { kReady, kNoMember, kLost };

  BackendLinks(Shared shared, uint64_t session_id);

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
  void NoteReply(const RequestRoute& route, std::span<const uint8_t> reply_document, bool failed);
  // Whether a reply says current() is no longer the primary and ran
  // nothing (NotWritablePrimary, NotPrimaryNoSecondaryOk), outside a
  // transaction: the request may be sent again to the new primary.
  bool AnsweredAsFormerPrimary(const std::optional<RequestRoute>& route,
                               std::span<const uint8_t> reply_document) const;
  // Tells the monitor that current() answered as a former primary.
  void ReportFormerPrimary();

  void CloseAll();

 private:
  struct Link {
    std::string address;  // "" for the direct connection
    std::unique_ptr<MessageStream> stream;
  };

  const Member* Choose(const TopologyView& view, const RequestRoute& route) const;
  bool UseOpenLink(const std::string& address, MemberKind kind);
  awaitable<bool> Connect(const Member& member);
  awaitable<bool> ConnectDirect();

  Shared shared_;
  const uint64_t session_id_;
  const uint32_t random_;  // spreads sessions over equally eligible members
  std::vector<Link> links_;
  MessageStream* current_ = nullptr;
  std::string current_address_;
  MemberKind current_kind_ = MemberKind::kUnknown;
  std::shared_ptr<const TopologyView> view_;
  uint64_t view_version_ = 0;
};

}  // namespace remold
