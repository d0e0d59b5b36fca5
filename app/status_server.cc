#include "app/status_server.h"

#include <algorithm>

namespace remold {
namespace {

constexpr std::chrono::milliseconds kProbeInterval{1000};
constexpr std::chrono::milliseconds kProbeTimeout{1000};

}  // namespace

StatusServer::StatusServer(Metrics& metrics, const BackendOptions& backend,
                           std::shared_ptr<const TlsContexts> tls, std::function<std::string()> rules_problem)
    : metrics_(metrics),
      rules_problem_(std::move(rules_problem)),
      probe_(context_, backend, std::move(tls), kProbeInterval, std::min(kProbeTimeout, backend.connect_timeout)) {
  http_.Route("/healthz", [] { return HttpResponse{200, "ok\n"}; });
  http_.Route("/readyz", [this] {
    std::string why = NotReadyReason();
    if (why.empty()) return HttpResponse{200, "ready\n"};
    return HttpResponse{503, "not ready: " + why + "\n"};
  });
  http_.Route("/metrics", [this] {
    return HttpResponse{200, metrics_.Render(), "text/plain; version=0.0.4; charset=utf-8"};
  });
  metrics_.AddCollector([this](prometheus::TextWriter& out) {
    out.Family("remold_backend_reachable", "gauge",
               "1 when the backend answered the last probe's isMaster (every second), over TLS as real traffic.");
    out.Sample("remold_backend_reachable", {}, uint64_t{probe_.reachable() ? 1u : 0u});
    out.Family("remold_ready", "gauge",
               "1 when /readyz answers 200: rules loaded and backend reachable.");
    out.Sample("remold_ready", {}, uint64_t{NotReadyReason().empty() ? 1u : 0u});
  });
}

StatusServer::~StatusServer() {
  context_.stop();
  if (thread_.joinable()) thread_.join();
}

tcp::endpoint StatusServer::Bind(const tcp::endpoint& listen) { return http_.Bind(listen); }

void StatusServer::Start() {
  probe_.Start();
  http_.Start();
  thread_ = std::thread([this] { context_.run(); });
}

std::string StatusServer::NotReadyReason() const {
  if (rules_problem_) {
    if (std::string why = rules_problem_(); !why.empty()) return why;
  }
  if (!probe_.probed()) return "backend not probed yet";
  if (!probe_.reachable()) return "backend unreachable: " + probe_.last_error();
  return "";
}

}  // namespace remold
