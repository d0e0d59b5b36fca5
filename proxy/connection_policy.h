// What remold applies to every client connection besides the wire protocol:
// TLS on both sides, and the limits that keep one client from taking what
// the others need (connections, message size, idle time).
//
// Past a limit a client gets a MongoDB error where the protocol allows one,
// then a clean close; other connections never notice:
// - max_connections: the connection is accepted, its first message answered
//   with {ok: 0, code: 6, errmsg: "remold: too many connections (limit N)"}
//   and closed (a driver shows that message instead of a bare network
//   error). At most kMaxPendingRefusals such answers are pending at once,
//   each bounded by kRefusalTimeout; beyond that the connection is closed
//   at once. One warning line per second at most.
// - max_message_size: a message declaring more bytes gets
//   {ok: 0, code: 10334 BSONObjectTooLarge}; the rest of it is read and
//   dropped, then the connection closes (the framing is intact, but the
//   client has sent something it was told not to).
// - idle_timeout: a connection that has not sent a whole request for that
//   long is closed; never while a request is in progress.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

#include "proxy/asio.h"
#include "proxy/message_stream.h"
#include "proxy/tls.h"
#include "proxy/wire/wire_format.h"

namespace remold {

struct ConnectionLimits {
  int max_connections = 0;                            // 0: unlimited
  int32_t max_message_size = wire::kMaxMessageSize;   // at most the wire limit
  std::chrono::milliseconds idle_timeout{0};          // 0: never
  std::chrono::milliseconds tls_handshake_timeout{10'000};
};

struct ConnectionPolicy {
  ConnectionLimits limits;
  std::shared_ptr<TlsContexts> tls;  // null: plain TCP on both sides

  std::shared_ptr<asio::ssl::context> client_tls() const { return tls ? tls->client() : nullptr; }
  std::shared_ptr<asio::ssl::context> backend_tls() const { return tls ? tls->backend() : nullptr; }
};

// Open client connections against max_connections. TryAcquire() from the
// acceptor, Release() from any thread when a session ends.
class ConnectionLimiter {
 public:
  explicit ConnectionLimiter(int limit = 0) : limit_(limit) {}
  bool TryAcquire() {
    const int64_t open = open_.fetch_add(1, std::memory_order_relaxed) + 1;
    if (limit_ > 0 && open > limit_) {
      open_.fetch_sub(1, std::memory_order_relaxed);
      return false;
    }
    return true;
  }
  void Release() { open_.fetch_sub(1, std::memory_order_relaxed); }
  int64_t open() const { return open_.load(std::memory_order_relaxed); }
  int limit() const { return limit_; }

 private:
  int limit_;
  std::atomic<int64_t> open_{0};
};

inline constexpr int kMaxPendingRefusals = 64;
inline constexpr std::chrono::milliseconds kRefusalTimeout{3'000};
// How long a client has to finish sending a message that is too large
// before remold stops reading it and closes.
inline constexpr std::chrono::milliseconds kDiscardTimeout{10'000};

// First thing in every session: the TLS handshake when client TLS is on
// (bounded by tls_handshake_timeout), then the message-size limit and the
// idle timeout. False: close the connection (the reason is logged).
awaitable<bool> PrepareClient(MessageStream& client, const ConnectionPolicy& policy,
                              uint64_t session_id);

// After client.Read() returned kTooLarge: answers with the error, drops the
// rest of the message (bounded by kDiscardTimeout), logs one line. The
// caller closes the connection.
awaitable<void> RejectTooLarge(MessageStream& client, int32_t reply_id, uint64_t session_id);

// Raises the soft limit on open files to the hard limit, and warns when it
// is still too low for `max_connections` clients (each uses two: its own
// connection and its backend connection). Call once at start.
void RaiseFileLimit(int max_connections);

// A connection accepted past max_connections: answered and closed in the
// background on the socket's executor, as described above. Called on that
// executor's thread (a worker's sockets are used on its thread only).
void RefuseConnection(Socket socket, const ConnectionPolicy& policy);

}  // namespace remold
