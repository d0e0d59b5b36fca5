// The listening server: accepts clients and runs one Session per client.
//
// Threads: one io_context per worker thread, each owning the sessions it was
// handed, so a session never crosses threads and needs no locks. The
// acceptor and signal handling run on the main thread's context. In pooled
// mode each worker has its own pool of backend connections.
// SIGTERM/SIGINT: stop accepting, let in-flight requests finish (idle
// connections close at once), force-close what remains after the drain
// timeout, then Run() returns.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "proxy/asio.h"
#include "proxy/backend_pool.h"
#include "proxy/connection_policy.h"
#include "proxy/rewrite_bridge.h"
#include "proxy/routing/route_pins.h"
#include "proxy/routing/topology_monitor.h"
#include "proxy/wire/backend_uri.h"
#include "ruleset/rule_set.h"

namespace remold {

struct ServerOptions {
  tcp::endpoint listen;
  BackendOptions backend;
  int worker_threads = 0;  // 0: one per hardware thread
  std::chrono::milliseconds drain_timeout{30'000};
  // The rules in force; reloads store a new set here. Empty when null.
  std::shared_ptr<const RuleSetHolder> rules;
  // Called on the main thread for each SIGHUP.
  std::function<void()> on_sighup;
  // Called once when the drain begins (SIGTERM/SIGINT or Stop()), from
  // the thread that began it: /readyz turns 503 from then on.
  std::function<void()> on_drain;
  // TLS (client side and backend) and the client limits; see
  // proxy/connection_policy.h. Default: plain TCP, no limits but the wire's.
  ConnectionPolicy policy;
  // Requests slower than this are logged (warn); 0: no slow-operation log.
  std::chrono::milliseconds slow_operation{0};
  // Whether client links may be compressed (Session::Shared).
  bool client_compression = false;
  // The backend's topology, monitored (started by the caller); null with
  // directConnection=true.
  std::shared_ptr<TopologyMonitor> topology;
  // Pooled mode (proxy/backend_pool.h) when max_per_member > 0: the limit
  // for the whole process, shared out between the workers (rounded up).
  PoolOptions pool;
};

class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();

  // Binds and listens; returns the bound endpoint (port 0 resolved).
  // Throws boost::system::system_error when the address cannot be bound.
  tcp::endpoint Bind();

  // Serves until SIGTERM/SIGINT (or Stop()) and the drain complete.
  void Run();

  // Begins the drain from any thread, as SIGTERM does.
  void Stop();

 private:
  class Worker;

  awaitable<void> AcceptLoop();
  void WaitForSignal();
  void BeginDrain();
  void IgnoreSignalsUntilExit();
  void WaitForDrain();

  // Enough for a few large messages at once; a core's worth each.
  static constexpr int kHeavyWorkThreads = 2;
  ServerOptions options_;
  asio::io_context main_context_{1};
  Acceptor acceptor_{main_context_};
  // Released, never destroyed, once stopping (IgnoreSignalsUntilExit).
  std::unique_ptr<asio::signal_set> signals_ = std::make_unique<asio::signal_set>(main_context_);
  // The rewriting of large messages (proxy/heavy_work.h); declared before
  // the workers, whose sessions use it, so it outlives them.
  asio::thread_pool heavy_work_{kHeavyWorkThreads};
  std::vector<std::unique_ptr<Worker>> workers_;
  EnsuredCommands ensured_;
  RoutingPins pins_;
  std::atomic<uint64_t> next_session_id_{1};
  std::atomic<bool> draining_{false};
  ConnectionLimiter connections_;  // open client connections vs max_connections
};

}  // namespace remold
