#include "proxy/message_stream.h"

#include <algorithm>
#include <cstring>

#include "proxy/wire_format.h"

namespace remold {
namespace {
constexpr size_t kReadAheadSize = 64 * 1024;
}

MessageStream::MessageStream(tcp::socket socket)
    : socket_(std::move(socket)), buffer_(kReadAheadSize) {
  boost::system::error_code ignored;
  socket_.set_option(tcp::no_delay(true), ignored);
}

awaitable<bool> MessageStream::FillAtLeast(size_t bytes) {
  if (begin_ == end_) begin_ = end_ = 0;
  if (buffer_.size() - begin_ < bytes) {
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  while (end_ - begin_ < bytes) {
    boost::system::error_code ec;
    size_t n = co_await socket_.async_read_some(
        asio::buffer(buffer_.data() + end_, buffer_.size() - end_),
        asio::redirect_error(use_awaitable, ec));
    if (ec || n == 0) co_return false;
    end_ += n;
  }
  co_return true;
}

awaitable<ReadStatus> MessageStream::Read(std::vector<uint8_t>& out) {
  if (!co_await FillAtLeast(wire::kHeaderSize)) co_return ReadStatus::kClosed;
  int32_t length = wire::LoadInt32(buffer_.data() + begin_);
  if (!wire::IsValidMessageLength(length)) {
    bad_length_ = length;
    co_return ReadStatus::kBadLength;
  }
  const size_t size = static_cast<size_t>(length);
  out.resize(size);
  const size_t buffered = std::min(size, end_ - begin_);
  std::memcpy(out.data(), buffer_.data() + begin_, buffered);
  begin_ += buffered;
  if (buffered < size) {
    boost::system::error_code ec;
    co_await asio::async_read(socket_, asio::buffer(out.data() + buffered, size - buffered),
                              asio::redirect_error(use_awaitable, ec));
    if (ec) co_return ReadStatus::kClosed;
  }
  co_return ReadStatus::kOk;
}

awaitable<bool> MessageStream::Write(std::span<const uint8_t> message) {
  boost::system::error_code ec;
  co_await asio::async_write(socket_, asio::buffer(message.data(), message.size()),
                             asio::redirect_error(use_awaitable, ec));
  co_return !ec;
}

void MessageStream::Close() {
  boost::system::error_code ignored;
  socket_.shutdown(tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
}

}  // namespace remold
