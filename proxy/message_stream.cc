#include "proxy/message_stream.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "proxy/message_stream_io.h"

namespace remold {
namespace {

// OP_COMPRESSED: header, int32 originalOpcode, int32 uncompressedSize, uint8 compressorId.
constexpr size_t kCompressedPrefixSize = wire::kHeaderSize + 9;

}  // namespace

// Read() and Write() pick the plain socket or the TLS stream once; the
// coroutines (message_stream_io.h) are instantiated for each, the TLS ones
// in message_stream_tls.cc. So the plain path has the code, coroutine frames
// and inlining it had before TLS existed: a frame that grows misses Asio's
// one-block-per-thread frame recycling, and templates instantiated twice in
// one file get inlined less (both measured with callgrind).

awaitable<ReadStatus> MessageStream::Read(std::vector<uint8_t>& out) {
  if (tls_) return ReadTls(out);
  return ReadFrom<Socket>(out);
}

awaitable<bool> MessageStream::Write(std::span<const uint8_t> message) {
  if (tls_) return WriteTls(message);
  return WriteTo<Socket>(message);
}

awaitable<bool> MessageStream::DiscardRejected() {
  if (tls_) return DiscardRejectedTls();
  return DiscardRejectedFrom<Socket>();
}

std::optional<std::span<const uint8_t>> MessageStream::WriteNow(std::span<const uint8_t> message) {
  if (tls_) return message;
  const std::optional<size_t> sent = SendWithoutWaiting(message);
  if (!sent) return std::nullopt;
  return message.subspan(*sent);
}

void MessageStream::MakeRoomFor(size_t bytes) {
  if (begin_ == end_) begin_ = end_ = 0;
  if (buffer_.size() - begin_ < bytes) {
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
}

std::optional<size_t> MessageStream::SendWithoutWaiting(std::span<const uint8_t> message) {
  size_t sent = 0;
  while (sent < message.size()) {
    const ssize_t n = ::send(socket_.native_handle(), message.data() + sent, message.size() - sent,
                             MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    return std::nullopt;
  }
  return sent;
}

ReadStatus MessageStream::RejectBuffered(int32_t length) {
  bad_length_ = length;
  rejected_header_ = wire::ReadHeader({buffer_.data() + begin_, wire::kHeaderSize});
  const size_t buffered = std::min(static_cast<size_t>(length), end_ - begin_);
  begin_ += buffered;
  rejected_left_ = static_cast<size_t>(length) - buffered;
  return ReadStatus::kTooLarge;
}

// A compressed message is as large as what it decompresses to.
bool MessageStream::CompressedTooLarge(const std::vector<uint8_t>& message) {
  if (message.size() < kCompressedPrefixSize ||
      wire::LoadInt32(message.data() + 12) != static_cast<int32_t>(wire::OpCode::kCompressed))
    return false;
  const int64_t uncompressed = int64_t{wire::LoadInt32(message.data() + 20)} + wire::kHeaderSize;
  if (uncompressed <= max_message_size_) return false;
  bad_length_ = static_cast<int32_t>(std::min<int64_t>(uncompressed, std::numeric_limits<int32_t>::max()));
  rejected_header_ = wire::ReadHeader(message);
  rejected_header_.op_code = wire::LoadInt32(message.data() + wire::kHeaderSize);
  rejected_left_ = 0;
  return true;
}

bool MessageStream::HasPendingInput() {
  if (mid_message_ || end_ > begin_) return true;
  if (tls_ && TlsHasPendingInput()) return true;
  boost::system::error_code ec;
  const size_t waiting = socket_.available(ec);
  return !ec && waiting > 0;
}

bool MessageStream::PeerClosed() {
  if (!socket_.is_open()) return true;
  if (end_ > begin_) return false;  // bytes buffered: not an idle close
  uint8_t byte;
  const ssize_t got = ::recv(socket_.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (got > 0) return false;
  if (got == 0) return true;  // EOF
  return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

void MessageStream::Close() {
  boost::system::error_code ignored;
  socket_.shutdown(Socket::shutdown_both, ignored);
  socket_.close(ignored);
}

// ---------------------------------------------------------------------------
// Idle timeout: one timer per stream, armed for the moment the pending Read()
// (if any) will have waited `timeout`. A request costs a clock read, no timer
// operation; the timer wakes at most once per `timeout`.

void MessageStream::EnableIdleTimeout(std::chrono::milliseconds timeout,
                                      std::function<void()> on_idle) {
  if (timeout.count() <= 0) return;
  idle_ = std::make_shared<IdleWatch>(socket_.get_executor(), this, timeout, std::move(on_idle));
  ArmIdleTimer(idle_, std::chrono::steady_clock::now() + timeout);
}

void MessageStream::ArmIdleTimer(const std::shared_ptr<IdleWatch>& watch,
                                 std::chrono::steady_clock::time_point at) {
  watch->timer.expires_at(at);
  // The stream owns the watch; a handler that outlives it finds nothing.
  watch->timer.async_wait([weak = std::weak_ptr<IdleWatch>(watch)](boost::system::error_code ec) {
    std::shared_ptr<IdleWatch> watch = weak.lock();
    if (ec || !watch) return;
    const auto now = std::chrono::steady_clock::now();
    if (watch->waiting && now - watch->since >= watch->timeout) {
      if (watch->on_idle) watch->on_idle();
      watch->stream->Close();
      return;
    }
    ArmIdleTimer(watch, (watch->waiting ? watch->since : now) + watch->timeout);
  });
}

}  // namespace remold
