// Minimal blocking MongoDB OP_MSG client for the benchmark.
//
// Contract: one WireClient owns one TCP socket (TCP_NODELAY, 10 s receive
// timeout). command() sends one OP_MSG with a single kind-0 section (no
// checksum, no flags) and blocks until the matching reply arrives, read by
// its length prefix. The returned document points into the client's buffer and
// is valid until the next command() on the same client. Any I/O or framing
// problem throws WireError; command-level errors ({ok: 0}) are left to the
// caller. Not thread-safe: one client per thread.
#pragma once

#include <bson/bson.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace remold_bench {

class WireError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Endpoint {
  std::string host;
  std::string port;
  std::string text() const { return host + ":" + port; }
};

// Parses "HOST:PORT" (the last colon splits); throws std::invalid_argument.
Endpoint parse_endpoint(const std::string& text);

class WireClient {
 public:
  explicit WireClient(const Endpoint& endpoint);
  ~WireClient();
  WireClient(const WireClient&) = delete;
  WireClient& operator=(const WireClient&) = delete;

  // Sends `command` (must contain $db) and returns the reply body.
  const bson_t& command(const bson_t& command);

 private:
  void send_all(const uint8_t* data, size_t size);
  void recv_exact(uint8_t* data, size_t size);
  void read_reply(int32_t request_id);

  int fd_ = -1;
  int32_t next_request_id_ = 1;
  std::vector<uint8_t> out_;
  std::vector<uint8_t> in_;
  bson_t reply_{};  // static view into in_, never destroyed
};

// True when the reply has a numeric ok equal to 1.
bool reply_ok(const bson_t& reply);

// The reply's errmsg, or a short description when it has none.
std::string reply_error(const bson_t& reply);

// Number of documents in cursor.firstBatch, or -1 when it is missing.
int first_batch_size(const bson_t& reply);

}  // namespace remold_bench
