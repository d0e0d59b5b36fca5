// A loopback TCP relay that sits between the driver and the server under
// test and counts the wire messages passing each way by opcode and, for
// OP_COMPRESSED, by compressor id. Bytes are relayed unchanged. Used to check
// that compression is really on the wire in both directions.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace e2e {

enum class Direction { kToServer, kToClient };

// What a message header says: opcode, plus for OP_COMPRESSED (2012) the
// wrapped opcode and the compressor id (1 snappy, 2 zlib, 3 zstd).
struct FrameKind {
  int32_t opcode = 0;
  int32_t original_opcode = 0;
  int compressor_id = -1;
  auto operator<=>(const FrameKind&) const = default;
};

class WireTap {
 public:
  // Relays to target_host:target_port; listens on 127.0.0.1, ephemeral port.
  WireTap(std::string target_host, uint16_t target_port);
  ~WireTap();
  WireTap(const WireTap&) = delete;
  WireTap& operator=(const WireTap&) = delete;

  uint16_t port() const { return port_; }
  std::map<FrameKind, int> Counts(Direction direction) const;

 private:
  void AcceptLoop();
  void Relay(int from, int to, Direction direction);

  std::string target_host_;
  uint16_t target_port_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;

  mutable std::mutex mutex_;
  std::vector<int> sockets_;
  std::vector<std::thread> relays_;
  std::map<FrameKind, int> counts_[2];
};

}  // namespace e2e
