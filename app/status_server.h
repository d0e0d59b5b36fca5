// --metrics-listen: the HTTP status endpoint, on a thread of its own.
//
//   GET /metrics  Prometheus text format 0.0.4 (GlobalMetrics and collectors)
//   GET /healthz  200 "ok" while the process runs
//   GET /readyz   200 "ready" when the rules are loaded and the backend
//                 answered the last probe's isMaster; 503 "not ready: <why>"
//                 otherwise
//
// The backend probe (a connection and an isMaster every second, over TLS
// as real traffic when the backend uses it) runs on the same thread.
// Nothing here touches the workers: a slow scrape never delays a request.
#pragma once

#include <functional>
#include <string>
#include <thread>

#include "proxy/asio.h"
#include "proxy/backend_probe.h"
#include "proxy/http_endpoint.h"
#include "proxy/metrics.h"
#include "proxy/wire/backend_uri.h"

namespace remold {

class StatusServer {
 public:
  // rules_problem: "" when the rules are loaded, else why not (one line).
  // tls: the TLS contexts of real traffic (null: plain TCP on both sides).
  StatusServer(Metrics& metrics, const BackendOptions& backend, std::shared_ptr<const TlsContexts> tls,
               std::function<std::string()> rules_problem);
  ~StatusServer();

  // Binds (throws boost::system::system_error); returns the bound endpoint.
  tcp::endpoint Bind(const tcp::endpoint& listen);
  // Starts the thread: the probe and the HTTP endpoint.
  void Start();

  // "" when ready, else why not.
  std::string NotReadyReason() const;

 private:
  Metrics& metrics_;
  std::function<std::string()> rules_problem_;
  asio::io_context context_{1};
  HttpEndpoint http_{context_};
  BackendProbe probe_;
  std::thread thread_;
};

}  // namespace remold
