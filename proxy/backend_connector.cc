#include "proxy/backend_connector.h"

#include <spdlog/spdlog.h>

namespace remold {
namespace {

awaitable<std::optional<tcp::socket>> ConnectOne(const HostAndPort& target,
                                                 std::chrono::milliseconds timeout) {
  auto executor = co_await asio::this_coro::executor;
  boost::system::error_code ec;
  tcp::resolver resolver(executor);
  auto endpoints = co_await resolver.async_resolve(target.host, std::to_string(target.port),
                                                   asio::redirect_error(use_awaitable, ec));
  if (ec) {
    spdlog::warn("backend {}:{}: cannot resolve: {}", target.host, target.port, ec.message());
    co_return std::nullopt;
  }
  // Shared with the deadline's handler, which may run after this frame ends.
  auto socket = std::make_shared<tcp::socket>(executor);
  asio::steady_timer deadline(executor, timeout);
  deadline.async_wait([socket](boost::system::error_code wait_ec) {
    if (!wait_ec) {
      boost::system::error_code ignored;
      socket->close(ignored);
    }
  });
  co_await asio::async_connect(*socket, endpoints, asio::redirect_error(use_awaitable, ec));
  deadline.cancel();
  if (ec || !socket->is_open()) {
    spdlog::warn("backend {}:{}: cannot connect: {}", target.host, target.port,
                 ec ? ec.message() : "timed out");
    co_return std::nullopt;
  }
  co_return std::move(*socket);
}

}  // namespace

awaitable<std::optional<tcp::socket>> ConnectBackend(const BackendOptions& options) {
  for (const HostAndPort& host : options.hosts) {
    std::optional<tcp::socket> socket = co_await ConnectOne(host, options.connect_timeout);
    if (socket) co_return socket;
  }
  co_return std::nullopt;
}

}  // namespace remold
