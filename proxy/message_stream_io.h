// The read and write coroutines of MessageStream, for its two .cc files:
// message_stream.cc instantiates them for the plain socket, and
// message_stream_tls.cc for the TLS stream. Kept apart so the plain path
// compiles (and inlines) as it did before TLS existed; see message_stream.cc.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <optional>
#include <type_traits>

#include "proxy/message_stream.h"

namespace remold {

struct MessageStream::IdleWatch {
  template <typename Executor>
  IdleWatch(const Executor& executor, MessageStream* s, std::chrono::milliseconds t,
            std::function<void()> f)
      : timer(executor), stream(s), timeout(t), on_idle(std::move(f)) {}
  SteadyTimer timer;
  MessageStream* stream;
  std::chrono::milliseconds timeout;
  std::function<void()> on_idle;
  bool waiting = false;  // a Read() is pending
  std::chrono::steady_clock::time_point since;
};

// Marks the stream as waiting for a message for the duration of a Read().
class MessageStream::IdleScope {
 public:
  explicit IdleScope(IdleWatch* watch) : watch_(watch) {
    if (!watch_) return;
    watch_->waiting = true;
    watch_->since = std::chrono::steady_clock::now();
  }
  ~IdleScope() {
    if (watch_) watch_->waiting = false;
  }

 private:
  IdleWatch* watch_;
};

// The stream a Stream instantiation uses, picked inside the coroutine rather
// than passed in: a parameter would grow every frame by 8 bytes, and a
// frame larger than the block Asio recycled last costs a malloc/free pair
// (measured: the write path missed 1.5 times per op). The TLS
// specialization is in message_stream_tls.cc.
template <>
inline Socket& MessageStream::StreamOf<Socket>() {
  return socket_;
}

template <typename Stream>
awaitable<bool> MessageStream::FillAtLeast(size_t bytes) {
  MakeRoomFor(bytes);
  while (end_ - begin_ < bytes) {
    boost::system::error_code ec;
    size_t n = co_await StreamOf<Stream>().async_read_some(
        asio::buffer(buffer_.data() + end_, buffer_.size() - end_),
        asio::redirect_error(use_awaitable, ec));
    if (ec || n == 0) co_return false;
    end_ += n;
  }
  co_return true;
}

// Reads the header with its own loop rather than FillAtLeast: a nested
// coroutine costs a frame and a trip through Asio's frame stack per
// message (measured with callgrind).
template <typename Stream>
awaitable<ReadStatus> MessageStream::ReadFrom(std::vector<uint8_t>& out) {
  IdleScope idle(idle_.get());
  MakeRoomFor(wire::kHeaderSize);
  while (end_ - begin_ < wire::kHeaderSize) {
    boost::system::error_code ec;
    const size_t n = co_await StreamOf<Stream>().async_read_some(
        asio::buffer(buffer_.data() + end_, buffer_.size() - end_),
        asio::redirect_error(use_awaitable, ec));
    if (ec || n == 0) co_return ReadStatus::kClosed;
    end_ += n;
  }
  int32_t length = wire::LoadInt32(buffer_.data() + begin_);
  if (!wire::IsValidMessageLength(length)) {
    bad_length_ = length;
    co_return ReadStatus::kBadLength;
  }
  if (length > max_message_size_) co_return RejectBuffered(length);
  const size_t size = static_cast<size_t>(length);
  out.resize(size);
  const size_t buffered = std::min(size, end_ - begin_);
  std::memcpy(out.data(), buffer_.data() + begin_, buffered);
  begin_ += buffered;
  if (buffered < size) {
    boost::system::error_code ec;
    mid_message_ = true;
    co_await asio::async_read(StreamOf<Stream>(), asio::buffer(out.data() + buffered, size - buffered),
                              asio::redirect_error(use_awaitable, ec));
    mid_message_ = false;
    if (ec) co_return ReadStatus::kClosed;
  }
  if (max_message_size_ < wire::kMaxMessageSize && CompressedTooLarge(out))
    co_return ReadStatus::kTooLarge;
  co_return ReadStatus::kOk;
}

template <typename Stream>
awaitable<bool> MessageStream::DiscardRejectedFrom() {
  while (rejected_left_ > 0) {
    if (!co_await FillAtLeast<Stream>(1)) co_return false;
    const size_t take = std::min(rejected_left_, end_ - begin_);
    begin_ += take;
    rejected_left_ -= take;
  }
  co_return true;
}

// On the plain socket the message is first sent without waiting: a socket
// buffer with room takes it at once, and only what it leaves goes through
// an asynchronous write (whose completion costs a trip through the
// scheduler; measured with callgrind).
template <typename Stream>
awaitable<bool> MessageStream::WriteTo(std::span<const uint8_t> message) {
  if constexpr (std::is_same_v<Stream, Socket>) {
    const std::optional<size_t> sent = SendWithoutWaiting(message);
    if (!sent) co_return false;
    message = message.subspan(*sent);
    if (message.empty()) co_return true;
  }
  boost::system::error_code ec;
  co_await asio::async_write(StreamOf<Stream>(), asio::buffer(message.data(), message.size()),
                             asio::redirect_error(use_awaitable, ec));
  co_return !ec;
}

}  // namespace remold
