#include "proxy/backend_connector.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <mutex>
#include <string>
#include <unordered_map>

#include "proxy/deadline.h"

namespace remold {
namespace {

std::string HostName(const HostAndPort& target) {
  return target.host + ":" + std::to_string(target.port);
}

}  // namespace

awaitable<BackendConnection> OpenBackendHost(const HostAndPort& target, const BackendOptions& options,
                                             const std::shared_ptr<asio::ssl::context>& tls) {
  auto executor = co_await asio::this_coro::executor;
  if (options.tls.enabled && !tls)
    co_return BackendConnection{nullptr, HostName(target) + ": tls=true but no TLS context was loaded"};
  boost::system::error_code ec;
  Resolver resolver(executor);
  auto endpoints = co_await resolver.async_resolve(target.host, std::to_string(target.port),
                                                   asio::redirect_error(use_awaitable, ec));
  if (ec) co_return BackendConnection{nullptr, HostName(target) + ": cannot resolve: " + ec.message()};
  // One budget, the connect timeout, for the TCP connection and the TLS
  // handshake together.
  Socket socket(executor);
  Socket* open = &socket;  // the stream's once it owns the socket
  Deadline deadline(executor, options.connect_timeout, [&open] {
    boost::system::error_code ignored;
    open->close(ignored);
  });
  co_await asio::async_connect(socket, endpoints, asio::redirect_error(use_awaitable, ec));
  if (ec || !socket.is_open())
    co_return BackendConnection{
        nullptr, HostName(target) + ": cannot connect: " + (deadline.expired() ? "timed out" : ec.message())};
  auto stream = std::make_unique<MessageStream>(std::move(socket));
  open = &stream->socket();
  if (!tls) co_return BackendConnection{std::move(stream), ""};
  const bool verify_host = !options.tls.allow_invalid_hostnames && !options.tls.allow_invalid_certificates;
  std::string error = co_await stream->StartTls(tls, TlsRole::kClient, target.host, verify_host);
  if (deadline.expired()) error = "timed out";
  if (error.empty()) co_return BackendConnection{std::move(stream), ""};
  std::string hint;
  if (error.find("certificate verify failed") != std::string::npos) {
    hint = error.find("mismatch") != std::string::npos
               ? " (the certificate does not name this host; tlsAllowInvalidHostnames=true skips the check)"
           : options.tls.ca_file.empty() ? " (no tlsCAFile: checked against the system's CAs)"
                                         : " (checked against tlsCAFile " + options.tls.ca_file + ")";
  } else if (error.find("wrong version number") != std::string::npos) {
    hint = " (does the backend speak TLS?)";
  }
  co_return BackendConnection{nullptr, HostName(target) + ": TLS handshake failed: " + error + hint};
}

namespace {

// Every session retries while its member is down (every 20 ms until the
// monitor notices): one line per host and second, process-wide, says how
// many failures it stands for.
class FailureLog {
 public:
  void Note(const std::string& host, const std::string& error) {
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard lock(mutex_);
    Entry& entry = entries_[host];
    if (now - entry.logged < std::chrono::seconds(1)) {
      ++entry.unlogged;
      return;
    }
    if (entry.unlogged == 0) spdlog::warn("backend {}", error);
    else spdlog::warn("backend {} ({} more failure(s) in the last second)", error, entry.unlogged);
    entry.logged = now;
    entry.unlogged = 0;
  }

 private:
  struct Entry {
    std::chrono::steady_clock::time_point logged;
    uint64_t unlogged = 0;
  };
  std::mutex mutex_;
  std::unordered_map<std::string, Entry> entries_;
};

FailureLog& ConnectFailures() {
  static FailureLog* log = new FailureLog;  // never destroyed: sessions may log until exit
  return *log;
}

awaitable<std::unique_ptr<MessageStream>> ConnectOne(const HostAndPort& target,
                                                     const BackendOptions& options,
                                                     const std::shared_ptr<asio::ssl::context>& tls) {
  BackendConnection connection = co_await OpenBackendHost(target, options, tls);
  if (!connection.stream) ConnectFailures().Note(HostName(target), connection.error);
  co_return std::move(connection.stream);
}

}  // namespace

awaitable<std::unique_ptr<MessageStream>> ConnectBackendHost(
    const HostAndPort& host, const BackendOptions& options, std::shared_ptr<asio::ssl::context> tls) {
  co_return co_await ConnectOne(host, options, tls);
}

awaitable<std::unique_ptr<MessageStream>> ConnectBackend(const BackendOptions& options,
                                                         std::shared_ptr<asio::ssl::context> tls) {
  for (const HostAndPort& host : options.hosts) {
    std::unique_ptr<MessageStream> stream = co_await ConnectOne(host, options, tls);
    if (stream) co_return stream;
  }
  co_return nullptr;
}

}  // namespace remold
