// Is the backend reachable? Every `interval`, the backend's hosts in order
// are connected to as real traffic connects (proxy/backend_connector.h: with
// tls=true, the TLS handshake with the same certificate checks) and sent
// an isMaster; reachable when one host answers it with ok: 1 within
// `timeout`. The connection is then closed. Logs only changes: the first
// failure, and the return.
//
// Runs on the io_context it is given; the state may be read from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "proxy/asio.h"
#include "proxy/tls.h"
#include "proxy/wire/backend_uri.h"

namespace remold {

class BackendProbe {
 public:
  // `tls`: the contexts real traffic uses (the backend's is read at each
  // probe, so a reload counts); null when the backend is plain TCP.
  BackendProbe(asio::io_context& context, BackendOptions backend, std::shared_ptr<const TlsContexts> tls,
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
  const BackendOptions backend_;  // connect_timeout: the probe's timeout
  const std::shared_ptr<const TlsContexts> tls_;
  const std::chrono::milliseconds interval_;
  const std::chrono::milliseconds timeout_;
  std::atomic<bool> probed_{false};
  std::atomic<bool> reachable_{false};
  mutable std::mutex error_mutex_;
  std::string last_error_;
};

}  // namespace remold
