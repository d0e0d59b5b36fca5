// Is the backend reachable? A TCP connect to the backend's hosts, in order,
// every `interval`, each attempt bounded by `timeout`; reachable when one
// host accepts. The connection is closed at once (no MongoDB handshake).
// Logs only changes: the first failure, and the return.
//
// Runs on the io_context it is given; the state may be read from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>

#include "proxy/asio.h"
#include "proxy/backend_uri.h"

namespace remold {

class BackendProbe {
 public:
  BackendProbe(asio::io_context& context, BackendOptions backend,
               std::chrono::milliseconds interval, std::chrono::milliseconds timeout);

  // Probes at once, then every interval, until the context stops.
  void Start();

  // False until the first probe completes.
  bool probed() const { return probed_.load(std::memory_order_acquire); }
  bool reachable() const { return reachable_.load(std::memory_order_acquire); }
  // Why the last probe failed ("host:port: connection refused; ...").
  std::string last_error() const;

 private:
  awaitable<void> Loop();
  awaitable<bool> TryHost(const HostAndPort& host, std::string& error);

  asio::io_context& context_;
  const BackendOptions backend_;
  const std::chrono::milliseconds interval_;
  const std::chrono::milliseconds timeout_;
  std::atomic<bool> probed_{false};
  std::atomic<bool> reachable_{false};
  mutable std::mutex error_mutex_;
  std::string last_error_;
};

}  // namespace remold
