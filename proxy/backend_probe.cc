#include "proxy/backend_probe.h"

#include <bson/bson.h>
#include <spdlog/spdlog.h>

#include "proxy/backend_connector.h"
#include "proxy/deadline.h"
#include "proxy/message_stream.h"
#include "proxy/wire/handshake.h"
#include "proxy/wire/op_msg.h"
#include "proxy/wire/reply_errors.h"

namespace remold {

namespace {

// {isMaster: 1, $db: "admin"} as an OP_MSG: every server version remold
// supports answers it, before any authentication.
std::vector<uint8_t> ProbeHello() {
  bson_t command = BSON_INITIALIZER;
  BSON_APPEND_INT32(&command, "isMaster", 1);
  BSON_APPEND_UTF8(&command, "$db", "admin");
  std::vector<uint8_t> message =
      wire::EncodeOpMsg(1, 0, 0, {bson_get_data(&command), static_cast<size_t>(command.len)});
  bson_destroy(&command);
  return message;
}

}  // namespace

BackendProbe::BackendProbe(asio::io_context& context, BackendOptions backend,
                           std::shared_ptr<const TlsContexts> tls, std::chrono::milliseconds interval,
                           std::chrono::milliseconds timeout)
    : context_(context), backend_(std::move(backend)), tls_(std::move(tls)), interval_(interval), timeout_(timeout) {}

void BackendProbe::Start() { asio::co_spawn(context_, Loop(), asio::detached); }

std::string BackendProbe::last_error() const {
  std::lock_guard lock(error_mutex_);
  return last_error_;
}

awaitable<bool> BackendProbe::TryHost(const HostAndPort& target, std::string& error) {
  BackendOptions options = backend_;
  options.connect_timeout = timeout_;
  // Named: g++ 12 destroys a temporary in a co_await expression twice.
  const std::shared_ptr<asio::ssl::context> tls = tls_ ? tls_->backend() : nullptr;
  BackendConnection connection = co_await OpenBackendHost(target, options, tls);
  if (!connection.stream) {
    error = std::move(connection.error);
    co_return false;
  }
  MessageStream& stream = *connection.stream;
  Deadline deadline(context_.get_executor(), timeout_, [&stream] { stream.Close(); });
  const std::vector<uint8_t> hello = ProbeHello();
  std::vector<uint8_t> reply;
  bool answered = co_await stream.Write(hello);
  if (answered) answered = co_await stream.Read(reply) == ReadStatus::kOk;
  const std::string name = target.host + ":" + std::to_string(target.port);
  if (!answered) {
    error = name + ": no answer to isMaster: " + (deadline.expired() ? "timed out" : "connection closed");
    co_return false;
  }
  deadline.Cancel();
  stream.Close();
  const std::optional<std::span<const uint8_t>> document = wire::HandshakeReplyDocument(reply);
  const std::optional<wire::ReplyErrors> errors = document ? wire::ScanReplyErrors(*document) : std::nullopt;
  if (!errors || errors->failed) {
    error = name + ": isMaster failed" + (errors && errors->code ? " (code " + std::to_string(*errors->code) + ")" : "");
    co_return false;
  }
  co_return true;
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
