// Whole wire messages over one TCP socket.
//
// Read() returns exactly one message (header included) per call, reading
// ahead into a small buffer so a small message usually costs one syscall and
// a large one is read straight into its destination. The 4-byte length is
// checked against the protocol limits before anything is allocated.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "proxy/asio.h"

namespace remold {

enum class ReadStatus { kOk, kClosed, kBadLength };

class MessageStream {
 public:
  explicit MessageStream(tcp::socket socket);

  awaitable<ReadStatus> Read(std::vector<uint8_t>& out);
  // Returns false when the peer is gone.
  awaitable<bool> Write(std::span<const uint8_t> message);

  // The declared length of the message whose framing failed (kBadLength).
  int32_t bad_length() const { return bad_length_; }

  tcp::socket& socket() { return socket_; }
  void Close();

 private:
  awaitable<bool> FillAtLeast(size_t bytes);

  tcp::socket socket_;
  std::vector<uint8_t> buffer_;
  size_t begin_ = 0;
  size_t end_ = 0;
  int32_t bad_length_ = 0;
};

}  // namespace remold
