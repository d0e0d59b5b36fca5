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

// The stream waits for a message from StartWaiting to StopWaiting (a Read()).
inline void MessageStream::StartWaiting() {
  if (!idle_) return;
  idle_->waiting = true;
  idle_->since = std::chrono::steady_clock::now();
}

inline void MessageStream::StopWaiting() {
  if (idle_) idle_->waiting = false;
}

inline ReadStatus MessageStream::CheckCompressedSize(const std::vector<uint8_t>& message) {
  if (max_message_size_ < wire::kMaxMessageSize && CompressedTooLarge(message)) return ReadStatus::kTooLarge;
  return ReadStatus::kOk;
}

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

// Read() as one composed operation rather than a coroutine: a coroutine of
// its own cost a frame and a trip through Asio's frame stack per message,
// twice per request (measured with callgrind). Its steps: the header (read
// ahead into the buffer), then what the buffer does not hold of the
// message, straight into `out`. While it runs, the stream is waiting for
// a message (its idle watch).
template <typename Stream>
class MessageStream::ReadOp {
 public:
  ReadOp(MessageStream& stream, std::vector<uint8_t>& out) : stream_(stream), out_(out) {}

  template <typename Self>
  void operator()(Self& self, boost::system::error_code ec = {}, size_t n = 0) {
    switch (step_) {
      case Step::kStart:
        stream_.StartWaiting();
        stream_.MakeRoomFor(wire::kHeaderSize);
        if (stream_.end_ - stream_.begin_ >= wire::kHeaderSize) {
          // Read ahead already (pipelined requests): completed from the
          // executor, never inside the call that started the read.
          step_ = Step::kBuffered;
          asio::post(stream_.socket_.get_executor(), std::move(self));
          return;
        }
        step_ = Step::kHeader;
        break;
      case Step::kHeader:
        if (ec || n == 0) return Finish(self, ReadStatus::kClosed);
        stream_.end_ += n;
        break;
      case Step::kBuffered:
        break;
      case Step::kBody:
        stream_.mid_message_ = false;
        if (ec) return Finish(self, ReadStatus::kClosed);
        return Finish(self, stream_.CheckCompressedSize(out_));
    }
    MessageStream& s = stream_;
    if (s.end_ - s.begin_ < wire::kHeaderSize) {
      s.StreamOf<Stream>().async_read_some(asio::buffer(s.buffer_.data() + s.end_, s.buffer_.size() - s.end_),
                                           std::move(self));
      return;
    }
    const int32_t length = wire::LoadInt32(s.buffer_.data() + s.begin_);
    if (!wire::IsValidMessageLength(length)) {
      s.bad_length_ = length;
      return Finish(self, ReadStatus::kBadLength);
    }
    if (length > s.max_message_size_) return Finish(self, s.RejectBuffered(length));
    const size_t size = static_cast<size_t>(length);
    out_.resize(size);
    const size_t buffered = std::min(size, s.end_ - s.begin_);
    std::memcpy(out_.data(), s.buffer_.data() + s.begin_, buffered);
    s.begin_ += buffered;
    if (buffered < size) {
      step_ = Step::kBody;
      s.mid_message_ = true;
      asio::async_read(s.StreamOf<Stream>(), asio::buffer(out_.data() + buffered, size - buffered),
                       std::move(self));
      return;
    }
    Finish(self, s.CheckCompressedSize(out_));
  }

 private:
  enum class Step { kStart, kHeader, kBuffered, kBody };

  template <typename Self>
  void Finish(Self& self, ReadStatus status) {
    stream_.StopWaiting();
    self.complete(status);
  }

  MessageStream& stream_;
  std::vector<uint8_t>& out_;
  Step step_ = Step::kStart;
};

// No I/O object is named: the operation would hold a work-counting copy of
// its executor, counted and uncounted at every step (measured: about 180
// instructions a request). The worker's io_context has work of its own,
// and the pending read counts as work.
template <typename Stream>
awaitable<ReadStatus> MessageStream::ReadFrom(std::vector<uint8_t>& out) {
  return asio::async_compose<const asio::use_awaitable_t<Executor>, void(ReadStatus)>(ReadOp<Stream>(*this, out),
                                                                                       use_awaitable);
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
