#include "proxy/backend_probe.h"

#include <spdlog/spdlog.h>

namespace remold {

BackendProbe::BackendProbe(asio::io_context& context, BackendOptions backend,
                           std::chrono::milliseconds interval, std::chrono::milliseconds timeout)
    : context_(context), backend_(std::move(backend)), interval_(interval), timeout_(timeout) {}

void BackendProbe::Start() { asio::co_spawn(context_, Loop(), asio::detached); }

std::string BackendProbe::last_error() const {
  std::lock_guard lock(error_mutex_);
  return last_error_;
}

awaitable<bool> BackendProbe::TryHost(const HostAndPort& target, std::string& error) {
  const std::string name = target.host + ":" + std::to_string(target.port);
  boost::system::error_code ec;
  Resolver resolver(context_);
  auto endpoints = co_await resolver.async_resolve(target.host, std::to_string(target.port),
                                                   asio::redirect_error(use_awaitable, ec));
  if (ec) {
    error = name + ": cannot resolve: " + ec.message();
    co_return false;
  }
  // Shared with the deadline's handler, which may run after this frame ends.
  auto socket = std::make_shared<Socket>(context_);
  SteadyTimer deadline(context_, timeout_);
  deadline.async_wait([socket](boost::system::error_code wait_ec) {
    if (!wait_ec) {
      boost::system::error_code ignored;
      socket->close(ignored);
    }
  });
  co_await asio::async_connect(*socket, endpoints, asio::redirect_error(use_awaitable, ec));
  deadline.cancel();
  const bool connected = !ec && socket->is_open();
  if (!connected) error = name + ": " + (ec && socket->is_open() ? ec.message() : "timed out");
  boost::system::error_code ignored;
  socket->shutdown(Socket::shutdown_both, ignored);
  socket->close(ignored);
  co_return connected;
}

awaitable<void> BackendProbe::Loop() {
  SteadyTimer timer(context_);
  for (;;) {
    bool reachable = false;
    std::string errors;
    for (const HostAndPort& host : backend_.hosts) {
      std::string error;
      if (co_await TryHost(host, error)) {
        reachable = true;
        break;
      }
      errors += (errors.empty() ? "" : "; ") + error;
    }
    const bool first = !probed_.load(std::memory_order_relaxed);
    const bool was = reachable_.load(std::memory_order_relaxed);
    {
      std::lock_guard lock(error_mutex_);
      last_error_ = reachable ? "" : errors;
    }
    reachable_.store(reachable, std::memory_order_release);
    probed_.store(true, std::memory_order_release);
    if (!reachable && (first || was))
      spdlog::warn("backend probe: unreachable ({}); /readyz answers 503", errors);
    else if (reachable && !first && !was)
      spdlog::info("backend probe: reachable again");

    timer.expires_after(interval_);
    boost::system::error_code ec;
    co_await timer.async_wait(asio::redirect_error(use_awaitable, ec));
    if (ec) co_return;
  }
}

}  // namespace remold
