#include "proxy/connection_policy.h"

#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <mutex>
#include <string>

#include "proxy/deadline.h"
#include "proxy/wire/error_reply.h"
#include "proxy/wire/wire_error.h"

namespace remold {
namespace {

std::string Peer(MessageStream& stream) {
  boost::system::error_code ec;
  tcp::endpoint peer = stream.socket().remote_endpoint(ec);
  if (ec) return "?";
  const std::string address = peer.address().to_string();
  return (peer.address().is_v6() ? "[" + address + "]" : address) + ":" + std::to_string(peer.port());
}

// The opcode an error answer to a message with this (original) opcode uses:
// OP_REPLY for a legacy OP_QUERY, OP_MSG for everything else.
int32_t AnswerOpCode(int32_t op_code) {
  return op_code == static_cast<int32_t>(wire::OpCode::kQuery) ? op_code
                                                                : static_cast<int32_t>(wire::OpCode::kMsg);
}

// At most one line per second; the lines left out are counted in the next.
class RefusalLog {
 public:
  void Refused(const std::string& peer, int limit, const char* how) {
    std::lock_guard lock(mutex_);
    const auto now = std::chrono::steady_clock::now();
    if (now - last_ < std::chrono::seconds(1)) {
      ++suppressed_;
      return;
    }
    last_ = now;
    if (suppressed_ > 0)
      spdlog::warn("refused a connection from {}: too many connections (limit {}); {} ({} more "
                   "refused since the last line)",
                   peer, limit, how, suppressed_);
    else
      spdlog::warn("refused a connection from {}: too many connections (limit {}); {}", peer,
                   limit, how);
    suppressed_ = 0;
  }

 private:
  std::mutex mutex_;
  std::chrono::steady_clock::time_point last_{};
  uint64_t suppressed_ = 0;
};

RefusalLog refusal_log;
std::atomic<int> pending_refusals{0};

awaitable<void> AnswerRefused(std::unique_ptr<MessageStream> stream,
                              std::shared_ptr<asio::ssl::context> tls, int limit) {
  auto executor = co_await asio::this_coro::executor;
  MessageStream* raw = stream.get();
  Deadline deadline(executor, kRefusalTimeout, [raw] { raw->Close(); });
  if (tls && !(co_await stream->StartTls(tls, TlsRole::kServer)).empty()) co_return;
  // The first message of a driver is its handshake: small. Anything larger
  // is not worth reading.
  stream->set_max_message_size(64 * 1024);
  std::vector<uint8_t> message;
  if (co_await stream->Read(message) == ReadStatus::kOk) {
    wire::MessageHeader header = wire::ReadHeader(message);
    int32_t op_code = header.op_code;
    if (op_code == static_cast<int32_t>(wire::OpCode::kCompressed) &&
        message.size() >= static_cast<size_t>(wire::kHeaderSize) + 4)
      op_code = wire::LoadInt32(message.data() + wire::kHeaderSize);
    wire::WireError error{error_codes::kHostUnreachable,
                          "remold: too many connections (limit " + std::to_string(limit) + ")",
                          true};
    co_await stream->Write(
        wire::EncodeErrorReply(error, header.request_id, AnswerOpCode(op_code), 1));
  }
  deadline.Cancel();
  stream->Close();
}

}  // namespace

awaitable<bool> PrepareClient(MessageStream& client, const ConnectionPolicy& policy,
                              uint64_t session_id) {
  const ConnectionLimits& limits = policy.limits;
  client.set_max_message_size(limits.max_message_size);
  if (std::shared_ptr<asio::ssl::context> tls = policy.client_tls()) {
    auto executor = co_await asio::this_coro::executor;
    Deadline deadline(executor, limits.tls_handshake_timeout, [&client] { client.Close(); });
    std::string error = co_await client.StartTls(std::move(tls), TlsRole::kServer);
    if (deadline.expired())
      error = "no handshake within " + std::to_string(limits.tls_handshake_timeout.count()) + " ms";
    deadline.Cancel();
    if (!error.empty()) {
      spdlog::info("session {}: TLS handshake with {} failed: {}; closing", session_id, Peer(client),
                   error);
      co_return false;
    }
  }
  if (limits.idle_timeout.count() > 0) {
    client.EnableIdleTimeout(limits.idle_timeout, [session_id, ms = limits.idle_timeout.count()] {
      spdlog::info("session {}: idle for {} ms: closing", session_id, ms);
    });
  }
  co_return true;
}

awaitable<void> RejectTooLarge(MessageStream& client, int32_t reply_id, uint64_t session_id) {
  const wire::MessageHeader& header = client.rejected_header();
  const int32_t limit = client.max_message_size();
  spdlog::warn("session {}: closing: a message of {} bytes exceeds max_message_size ({} bytes)",
               session_id, client.bad_length(), limit);
  wire::WireError error{error_codes::kBSONObjectTooLarge,
                        "remold: a message of " + std::to_string(client.bad_length()) +
                            " bytes exceeds maxMessageSizeBytes (" + std::to_string(limit) +
                            "); closing the connection",
                        true};
  if (!co_await client.Write(wire::EncodeErrorReply(error, header.request_id,
                                                    AnswerOpCode(header.op_code), reply_id)))
    co_return;
  // Read what is left of the message, so the close that follows is a clean
  // one (closing with unread data would reset the connection, and the
  // client could lose the error).
  auto executor = co_await asio::this_coro::executor;
  Deadline deadline(executor, kDiscardTimeout, [&client] { client.Close(); });
  co_await client.DiscardRejected();
}

void RaiseFileLimit(int max_connections) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  if (max_connections <= 0 || limit.rlim_cur == RLIM_INFINITY) return;
  const uint64_t needed = 2 * static_cast<uint64_t>(max_connections) + 64;
  if (limit.rlim_cur < needed)
    spdlog::warn("max_connections {} needs about {} open files, but the limit is {}: raise it "
                 "(ulimit -n, LimitNOFILE=) or lower max_connections; past it new connections "
                 "fail",
                 max_connections, needed, static_cast<uint64_t>(limit.rlim_cur));
}

void RefuseConnection(Socket socket, const ConnectionPolicy& policy) {
  auto stream = std::make_unique<MessageStream>(std::move(socket));
  const int limit = policy.limits.max_connections;
  if (pending_refusals.load() >= kMaxPendingRefusals) {
    refusal_log.Refused(Peer(*stream), limit, "closed at once (many refusals pending)");
    stream->Close();
    return;
  }
  refusal_log.Refused(Peer(*stream), limit, "answering its first message with an error");
  pending_refusals.fetch_add(1);
  auto executor = stream->socket().get_executor();
  asio::co_spawn(executor, AnswerRefused(std::move(stream), policy.client_tls(), limit),
                 [](std::exception_ptr) { pending_refusals.fetch_sub(1); });
}

}  // namespace remold
