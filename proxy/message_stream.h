// Whole wire messages over one TCP connection, in the clear or over TLS.
//
// Read() returns exactly one message (header included) per call, reading
// ahead into a small buffer so a small message usually costs one syscall and
// a large one is read straight into its destination. The 4-byte length is
// checked against the protocol limits (and the stream's own, smaller, limit)
// before anything is allocated.
//
// Plain TCP is the hot path and stays a direct socket call; after StartTls()
// the same calls go through an asio::ssl::stream over the same socket.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "proxy/asio.h"
#include "proxy/wire/wire_format.h"

namespace boost::asio::ssl {
class context;
}

namespace remold {

// kBadLength: the declared length is outside what the wire protocol allows
// (16..48,000,000); the framing cannot be trusted. kTooLarge: a well-framed
// message above this stream's max_message_size (rejected_header() and
// DiscardRejected() say and do the rest).
enum class ReadStatus { kOk, kClosed, kBadLength, kTooLarge };

enum class TlsRole { kServer, kClient };

class MessageStream {
 public:
  explicit MessageStream(Socket socket);
  ~MessageStream();
  MessageStream(const MessageStream&) = delete;
  MessageStream& operator=(const MessageStream&) = delete;

  // Runs the TLS handshake over the socket; from then on every read and
  // write is encrypted. As kClient, `host` is sent as SNI (a name, not an
  // address) and, with `verify_host`, must match the peer's certificate.
  // Returns "" on success, else why the handshake failed (one line).
  awaitable<std::string> StartTls(std::shared_ptr<asio::ssl::context> context, TlsRole role,
                                  const std::string& host = {}, bool verify_host = false);
  bool is_tls() const { return tls_ != nullptr; }

  awaitable<ReadStatus> Read(std::vector<uint8_t>& out);
  // Returns false when the peer is gone.
  awaitable<bool> Write(std::span<const uint8_t> message);
  // The start of Write() without a coroutine, for the hot path: on plain
  // TCP, sends what the socket takes at once. Returns what is left for
  // Write() (empty when all of it went out; all of it over TLS), or nullopt
  // when the peer is gone.
  std::optional<std::span<const uint8_t>> WriteNow(std::span<const uint8_t> message);

  // Messages declaring more bytes than this (at most the wire limit) are
  // kTooLarge; so is an OP_COMPRESSED whose uncompressed message would be.
  void set_max_message_size(int32_t bytes) { max_message_size_ = bytes; }
  int32_t max_message_size() const { return max_message_size_; }

  // The declared length of the message whose framing failed (kBadLength), or
  // of the message too large (kTooLarge; for OP_COMPRESSED, the size it
  // would have uncompressed).
  int32_t bad_length() const { return bad_length_; }
  // The header of the kTooLarge message (for OP_COMPRESSED, with the
  // original opcode), so it can be answered.
  const wire::MessageHeader& rejected_header() const { return rejected_header_; }
  // Reads and drops what is left of the kTooLarge message, so that closing
  // afterwards is a clean close, not a reset. False if the peer went away.
  awaitable<bool> DiscardRejected();

  // Closes the connection (calling `on_idle` first) once Read() has waited
  // `timeout` for a whole message: a client idle between requests, or one
  // that stopped halfway through a message. Never while no Read() is
  // pending (a request in progress, a reply awaited from the backend). One
  // timer per stream; a request costs one clock read.
  void EnableIdleTimeout(std::chrono::milliseconds timeout, std::function<void()> on_idle);

  // Whether part of a next message has arrived: read ahead into the
  // buffer, inside OpenSSL (a TLS record not yet decrypted whole), or
  // waiting in the socket. A session that is between requests
  // but has this is not idle (SIGTERM lets it finish that request).
  bool HasPendingInput();
  // Whether the peer has closed the connection (or reset it) while it was
  // idle: a non-blocking peek at the socket. False while the connection
  // looks alive or bytes are waiting. For a connection with no request in
  // flight.
  bool PeerClosed();

  Socket& socket() { return socket_; }
  void Close();

 private:
  struct Tls;
  struct IdleWatch;
  template <typename Stream>
  class ReadOp;

  // Defined in message_stream_io.h; instantiated for Socket
  // (message_stream.cc) and the TLS stream (message_stream_tls.cc).
  template <typename Stream>
  Stream& StreamOf();
  template <typename Stream>
  awaitable<bool> FillAtLeast(size_t bytes);
  template <typename Stream>
  awaitable<ReadStatus> ReadFrom(std::vector<uint8_t>& out);
  template <typename Stream>
  awaitable<bool> DiscardRejectedFrom();
  template <typename Stream>
  awaitable<bool> WriteTo(std::span<const uint8_t> message);
  // The TLS side of Read/Write/DiscardRejected (message_stream_tls.cc).
  awaitable<ReadStatus> ReadTls(std::vector<uint8_t>& out);
  awaitable<bool> WriteTls(std::span<const uint8_t> message);
  awaitable<bool> DiscardRejectedTls();
  bool TlsHasPendingInput();
  // Sends what the plain socket takes at once; the bytes sent, or nullopt
  // when the connection has failed.
  std::optional<size_t> SendWithoutWaiting(std::span<const uint8_t> message);
  // Moves buffered bytes to the front if `bytes` would not fit after them.
  void MakeRoomFor(size_t bytes);
  ReadStatus RejectBuffered(int32_t length);
  bool CompressedTooLarge(const std::vector<uint8_t>& message);
  // kTooLarge when a whole message just read is compressed and would be
  // above max_message_size uncompressed, else kOk.
  ReadStatus CheckCompressedSize(const std::vector<uint8_t>& message);
  // Read() is waiting for a message (the idle watch) from StartWaiting to
  // StopWaiting.
  void StartWaiting();
  void StopWaiting();
  static void ArmIdleTimer(const std::shared_ptr<IdleWatch>& watch,
                           std::chrono::steady_clock::time_point at);

  Socket socket_;
  std::unique_ptr<Tls> tls_;  // null: plain TCP
  std::shared_ptr<IdleWatch> idle_;
  std::vector<uint8_t> buffer_;
  size_t begin_ = 0;
  size_t end_ = 0;
  int32_t max_message_size_ = wire::kMaxMessageSize;
  int32_t bad_length_ = 0;
  wire::MessageHeader rejected_header_;
  size_t rejected_left_ = 0;  // bytes of the kTooLarge message not yet read
  bool mid_message_ = false;  // Read() has part of a message and awaits the rest
};

}  // namespace remold
