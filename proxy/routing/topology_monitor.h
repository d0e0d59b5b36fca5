// Watches the backend as a driver does and publishes what it sees as
// TopologyView snapshots (proxy/routing/topology_view.h) for the sessions to route
// by.
//
// The monitoring is libmongoc's (a client pool: one monitor thread per
// server, hello on each, streaming where the server offers it, the Server
// Discovery and Monitoring state machine). remold only listens to its
// events: topology changes for the members and their types, heartbeats for
// each member's lastWriteDate, round trip and errors.
//
// Errors seen on remold's own connections come back through
// ReportNotPrimary, as the specification asks of a driver: the member is
// not used as the primary until the monitor hears from it again.
//
// Thread-safe: events arrive on libmongoc's threads; View() may be called
// from any thread (a snapshot copy under a mutex; version() tells a caller
// whether its copy is current without the lock).
#pragma once

#include <bson/bson.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "proxy/routing/topology_view.h"
#include "proxy/wire/backend_uri.h"

struct _mongoc_client_pool_t;
struct _mongoc_client_t;
struct _mongoc_apm_topology_changed_t;
struct _mongoc_apm_server_heartbeat_succeeded_t;
struct _mongoc_apm_server_heartbeat_failed_t;

namespace remold {

class TopologyMonitor {
 public:
  // Monitors the hosts of `backend` with its TLS, timeouts and replica set
  // options. Nothing is contacted before Start(). Monitoring needs no
  // identity: remold's own work runs elsewhere (tools/common/backend_client.h),
  // so that a credential the backend refuses never marks a server unknown.
  explicit TopologyMonitor(const BackendOptions& backend);
  ~TopologyMonitor();
  TopologyMonitor(const TopologyMonitor&) = delete;
  TopologyMonitor& operator=(const TopologyMonitor&) = delete;

  // Starts the monitor threads; false with `error` set when libmongoc
  // refuses the options.
  bool Start(std::string& error);

  std::shared_ptr<const TopologyView> View() const;
  // Grows with every published change.
  uint64_t version() const { return version_.load(std::memory_order_acquire); }

  // `address` answered a request as a former primary (NotWritablePrimary
  // and the like) on one of remold's connections.
  void ReportNotPrimary(std::string_view address);

  // Since when the replica set has had no primary; nullopt while it has
  // one, or when the backend is not a replica set.
  std::optional<std::chrono::steady_clock::time_point> no_primary_since() const;
  uint64_t primary_changes() const { return primary_changes_.load(std::memory_order_relaxed); }

 private:
  struct MemberRecord {
    Member member;
    bool heard = false;              // a heartbeat finished, either way
    int64_t not_primary_since_us = 0;  // ReportNotPrimary; 0: not reported
  };

  static void OnTopologyChanged(const _mongoc_apm_topology_changed_t* event);
  static void OnHeartbeatSucceeded(const _mongoc_apm_server_heartbeat_succeeded_t* event);
  static void OnHeartbeatFailed(const _mongoc_apm_server_heartbeat_failed_t* event);

  // Builds and swaps in a new snapshot; called with mutex_ held.
  void PublishLocked();
  MemberRecord& RecordLocked(const std::string& address, const HostAndPort& host);

  const BackendOptions backend_;
  _mongoc_client_pool_t* pool_ = nullptr;
  // Popped: the pool monitors while a client is out. Read by the event
  // callbacks, which may start before the pop returns.
  std::atomic<_mongoc_client_t*> client_{nullptr};

  mutable std::mutex mutex_;
  TopologyKind kind_ = TopologyKind::kUnknown;
  std::string set_name_;
  std::map<std::string, MemberRecord> members_;
  std::shared_ptr<const TopologyView> view_;
  bool scanned_ = false;     // TopologyView::scanned, once true for good
  std::string last_logged_;  // the summary last logged, to log changes only
  std::string last_primary_;
  std::optional<std::chrono::steady_clock::time_point> no_primary_since_;
  std::atomic<uint64_t> version_{0};
  std::atomic<uint64_t> primary_changes_{0};
};

}  // namespace remold
