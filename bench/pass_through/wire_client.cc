// Minimal blocking OP_MSG client: see wire_client.h for the contract.
#include "wire_client.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace remold_bench {
namespace {

constexpr int32_t kOpMsg = 2013;
constexpr size_t kHeaderSize = 16;
constexpr uint32_t kChecksumPresent = 1u << 0;
constexpr uint32_t kMoreToCome = 1u << 1;
constexpr int32_t kMaxMessageSize = 48'000'000;

void put_i32(uint8_t* at, int32_t value) {
  const auto v = static_cast<uint32_t>(value);
  at[0] = static_cast<uint8_t>(v);
  at[1] = static_cast<uint8_t>(v >> 8);
  at[2] = static_cast<uint8_t>(v >> 16);
  at[3] = static_cast<uint8_t>(v >> 24);
}

int32_t get_i32(const uint8_t* at) {
  const uint32_t v = uint32_t{at[0]} | uint32_t{at[1]} << 8 |
                     uint32_t{at[2]} << 16 | uint32_t{at[3]} << 24;
  return static_cast<int32_t>(v);
}

std::string errno_text(const char* what) {
  return std::string(what) + ": " + std::strerror(errno);
}

int connect_socket(const Endpoint& endpoint) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(endpoint.host.c_str(), endpoint.port.c_str(),
                             &hints, &found);
  if (rc != 0) {
    throw WireError("resolve " + endpoint.text() + ": " + gai_strerror(rc));
  }
  int fd = -1;
  int last_errno = 0;
  for (addrinfo* ai = found; ai != nullptr && fd < 0; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      last_errno = errno;
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) {
    throw WireError("connect " + endpoint.text() + ": " + std::strerror(last_errno));
  }
  return fd;
}

void tune_socket(int fd) {
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  timeval timeout{};
  timeout.tv_sec = 10;
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
}

}  // namespace

Endpoint parse_endpoint(const std::string& text) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) {
    throw std::invalid_argument("expected HOST:PORT, got '" + text + "'");
  }
  return Endpoint{text.substr(0, colon), text.substr(colon + 1)};
}

WireClient::WireClient(const Endpoint& endpoint) : fd_(connect_socket(endpoint)) {
  tune_socket(fd_);
}

WireClient::~WireClient() {
  if (fd_ >= 0) close(fd_);
}

const bson_t& WireClient::command(const bson_t& command) {
  const int32_t request_id = next_request_id_++;
  const size_t size = kHeaderSize + 4 + 1 + command.len;
  out_.resize(size);
  put_i32(&out_[0], static_cast<int32_t>(size));
  put_i32(&out_[4], request_id);
  put_i32(&out_[8], 0);
  put_i32(&out_[12], kOpMsg);
  put_i32(&out_[16], 0);  // flagBits
  out_[20] = 0;           // section kind 0: the command body
  std::memcpy(&out_[21], bson_get_data(&command), command.len);
  send_all(out_.data(), out_.size());
  read_reply(request_id);
  return reply_;
}

void WireClient::send_all(const uint8_t* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::send(fd_, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw WireError(errno_text("send"));
    data += n;
    size -= static_cast<size_t>(n);
  }
}

void WireClient::recv_exact(uint8_t* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::recv(fd_, data, size, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) throw WireError("recv: connection closed by peer");
    if (n < 0) throw WireError(errno_text("recv"));
    data += n;
    size -= static_cast<size_t>(n);
  }
}

// Reads one whole message by its length prefix and points reply_ at its
// kind-0 section. Kind-1 sections are skipped; checksums are not verified.
void WireClient::read_reply(int32_t request_id) {
  in_.resize(kHeaderSize);
  recv_exact(in_.data(), kHeaderSize);
  const int32_t length = get_i32(&in_[0]);
  if (length < static_cast<int32_t>(kHeaderSize + 5) || length > kMaxMessageSize) {
    throw WireError("reply has bad length " + std::to_string(length));
  }
  in_.resize(static_cast<size_t>(length));
  recv_exact(in_.data() + kHeaderSize, in_.size() - kHeaderSize);
  if (get_i32(&in_[12]) != kOpMsg) throw WireError("reply is not OP_MSG");
  if (get_i32(&in_[8]) != request_id) throw WireError("reply answers another request");

  const auto flags = static_cast<uint32_t>(get_i32(&in_[16]));
  if (flags & kMoreToCome) throw WireError("unexpected moreToCome reply");
  size_t end = in_.size() - ((flags & kChecksumPresent) ? 4 : 0);
  size_t pos = kHeaderSize + 4;
  while (pos + 5 <= end) {
    const uint8_t kind = in_[pos++];
    const auto section = static_cast<size_t>(get_i32(&in_[pos]));
    if (section < 5 || pos + section > end) throw WireError("bad section length");
    if (kind == 0) {
      if (!bson_init_static(&reply_, &in_[pos], section)) {
        throw WireError("reply body is not BSON");
      }
      return;
    }
    pos += section;
  }
  throw WireError("reply has no kind-0 section");
}

bool reply_ok(const bson_t& reply) {
  bson_iter_t it;
  return bson_iter_init_find(&it, &reply, "ok") && bson_iter_as_double(&it) == 1.0;
}

std::string reply_error(const bson_t& reply) {
  bson_iter_t it;
  if (bson_iter_init_find(&it, &reply, "errmsg") && BSON_ITER_HOLDS_UTF8(&it)) {
    return bson_iter_utf8(&it, nullptr);
  }
  char* json = bson_as_relaxed_extended_json(&reply, nullptr);
  std::string text = json ? json : "(unprintable reply)";
  bson_free(json);
  return text;
}

int first_batch_size(const bson_t& reply) {
  bson_iter_t it;
  bson_iter_t batch;
  if (!bson_iter_init(&it, &reply) ||
      !bson_iter_find_descendant(&it, "cursor.firstBatch", &batch) ||
      !BSON_ITER_HOLDS_ARRAY(&batch) || !bson_iter_recurse(&batch, &it)) {
    return -1;
  }
  int count = 0;
  while (bson_iter_next(&it)) ++count;
  return count;
}

}  // namespace remold_bench
