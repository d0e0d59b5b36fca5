// WireTap (see wire_tap.h): one accept thread, two relay threads per
// connection. Each relay counts message headers before forwarding the bytes,
// so a count is recorded before the peer can see the message.

#include "wire_tap.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <stdexcept>

namespace e2e {
namespace {

constexpr int32_t kOpCompressed = 2012;
// Header (16 bytes) + OP_COMPRESSED's originalOpcode, uncompressedSize and
// compressorId (9 bytes). Every real message is at least this long.
constexpr size_t kPeek = 25;

int32_t Int32At(const std::string& bytes, size_t offset) {
  uint32_t value = 0;
  for (size_t i = 0; i < 4; ++i) value |= uint32_t{static_cast<uint8_t>(bytes[offset + i])} << (8 * i);
  return static_cast<int32_t>(value);
}

// Splits a byte stream into messages and reports each header.
class FrameParser {
 public:
  template <class OnFrame>
  void Feed(const char* data, size_t size, OnFrame on_frame) {
    while (size > 0) {
      if (skip_ > 0) {
        size_t n = std::min(skip_, size);
        skip_ -= n;
        data += n;
        size -= n;
        continue;
      }
      size_t n = std::min(kPeek - head_.size(), size);
      head_.append(data, n);
      data += n;
      size -= n;
      if (head_.size() < kPeek) continue;
      FrameKind kind{Int32At(head_, 12)};
      if (kind.opcode == kOpCompressed) {
        kind.original_opcode = Int32At(head_, 16);
        kind.compressor_id = static_cast<uint8_t>(head_[24]);
      }
      on_frame(kind);
      const int32_t length = Int32At(head_, 0);
      skip_ = length > static_cast<int32_t>(kPeek) ? static_cast<size_t>(length) - kPeek : 0;
      head_.clear();
    }
  }

 private:
  std::string head_;
  size_t skip_ = 0;
};

bool WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

void NoDelay(int fd) {
  int on = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
}

int ConnectTo(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return -1;
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  return fd;
}

}  // namespace

WireTap::WireTap(std::string target_host, uint16_t target_port)
    : target_host_(std::move(target_host)), target_port_(target_port) {
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (listen_fd_ < 0 || bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      listen(listen_fd_, 64) != 0 || getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    throw std::runtime_error("wire tap cannot listen on 127.0.0.1");
  }
  port_ = ntohs(address.sin_port);
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

WireTap::~WireTap() {
  stopping_ = true;
  shutdown(listen_fd_, SHUT_RDWR);  // wakes accept()
  acceptor_.join();
  close(listen_fd_);
  for (int fd : sockets_) shutdown(fd, SHUT_RDWR);  // wakes the relays
  for (std::thread& relay : relays_) relay.join();
  for (int fd : sockets_) close(fd);
}

std::map<FrameKind, int> WireTap::Counts(Direction direction) const {
  std::lock_guard lock(mutex_);
  return counts_[static_cast<int>(direction)];
}

void WireTap::AcceptLoop() {
  while (!stopping_) {
    int client = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;
    }
    int server = ConnectTo(target_host_, target_port_);
    if (server < 0) {
      close(client);
      continue;
    }
    NoDelay(client);
    NoDelay(server);
    std::lock_guard lock(mutex_);
    sockets_.push_back(client);
    sockets_.push_back(server);
    relays_.emplace_back([this, client, server] { Relay(client, server, Direction::kToServer); });
    relays_.emplace_back([this, client, server] { Relay(server, client, Direction::kToClient); });
  }
}

void WireTap::Relay(int from, int to, Direction direction) {
  FrameParser parser;
  char buffer[64 * 1024];
  for (;;) {
    ssize_t n = recv(from, buffer, sizeof buffer, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    parser.Feed(buffer, static_cast<size_t>(n), [&](const FrameKind& kind) {
      std::lock_guard lock(mutex_);
      ++counts_[static_cast<int>(direction)][kind];
    });
    if (!WriteAll(to, buffer, static_cast<size_t>(n))) break;
  }
  shutdown(to, SHUT_WR);
}

}  // namespace e2e
