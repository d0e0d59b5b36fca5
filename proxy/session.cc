#include "proxy/session.h"

#include <spdlog/spdlog.h>

#include "proxy/backend_connector.h"
#include "proxy/error_reply.h"
#include "proxy/handshake.h"
#include "proxy/op_compressed.h"
#include "proxy/op_msg.h"
#include "proxy/wire_format.h"

namespace remold {
namespace {

// Buffers above this size are released after use, so one large document does
// not pin memory for the life of the connection.
constexpr size_t kRetainedBufferSize = 1 << 20;

bool HasMoreToCome(const std::vector<uint8_t>& reply) {
  wire::MessageHeader header = wire::ReadHeader(reply);
  return header.op_code == static_cast<int32_t>(wire::OpCode::kMsg) &&
         reply.size() >= wire::kHeaderSize + 4 &&
         (wire::PeekOpMsgFlags(reply) & wire::msg_flags::kMoreToCome);
}

}  // namespace

Session::Session(tcp::socket client, const BackendOptions& backend, uint64_t id)
    : client_(std::move(client)), backend_options_(backend), id_(id) {}

void Session::Drain() {
  draining_ = true;
  if (state_ == State::kIdle) Abort();
}

void Session::Abort() {
  client_.Close();
  if (backend_) backend_->Close();
}

awaitable<void> Session::Run() {
  auto self = shared_from_this();
  spdlog::debug("session {}: open", id_);
  while (!draining_) {
    state_ = State::kIdle;
    ReadStatus status = co_await client_.Read(request_);
    if (status == ReadStatus::kClosed) break;
    if (status == ReadStatus::kBadLength) {
      spdlog::warn("session {}: closing: message length {} is outside {}..{}", id_,
                   client_.bad_length(), wire::kMinMessageSize, wire::kMaxMessageSize);
      break;
    }
    state_ = State::kBusy;
    if (!co_await Handle()) break;
    ReleaseLargeBuffers();
  }
  Abort();
  spdlog::debug("session {}: closed", id_);
}

awaitable<bool> Session::Handle() {
  wire::Request request;
  if (auto error = wire::DecodeRequest(request_, request)) {
    spdlog::info("session {}: rejected request {}: {}", id_, request.header.request_id,
                 error->message);
    if (error->close_connection || request.more_to_come) co_return false;
    co_return co_await ReplyWithError(request, *error);
  }
  if (!co_await EnsureBackend()) co_return false;
  if (!co_await backend_->Write(request_)) {
    spdlog::warn("session {}: backend connection lost while sending", id_);
    co_return false;
  }
  if (request.more_to_come) co_return true;
  if (request.is_handshake) negotiated_ = request.offered_compressors;
  co_return co_await RelayReplies(request);
}

awaitable<bool> Session::RelayReplies(const wire::Request& request) {
  for (;;) {
    if (co_await backend_->Read(reply_) != ReadStatus::kOk) {
      spdlog::warn("session {}: backend connection lost while awaiting a reply", id_);
      co_return false;
    }
    const bool more = HasMoreToCome(reply_);
    ShapeReply(request);
    if (!co_await client_.Write(reply_)) co_return false;
    if (!more) co_return true;
  }
}

void Session::ShapeReply(const wire::Request& request) {
  if (request.is_handshake) {
    if (!wire::RewriteHandshakeMessage(reply_, negotiated_))
      spdlog::warn("session {}: backend handshake reply is malformed; relayed as is", id_);
    return;
  }
  if (request.compressor) reply_ = wire::CompressMessage(reply_, *request.compressor);
}

awaitable<bool> Session::ReplyWithError(const wire::Request& request,
                                        const wire::WireError& error) {
  int32_t op_code = request.header.op_code;
  if (op_code != static_cast<int32_t>(wire::OpCode::kQuery)) op_code = static_cast<int32_t>(wire::OpCode::kMsg);
  std::vector<uint8_t> reply =
      wire::EncodeErrorReply(error, request.header.request_id, op_code, next_reply_id_++);
  if (request.compressor) reply = wire::CompressMessage(reply, *request.compressor);
  co_return co_await client_.Write(reply);
}

awaitable<bool> Session::EnsureBackend() {
  if (backend_) co_return true;
  std::optional<tcp::socket> socket = co_await ConnectBackend(backend_options_);
  if (!socket) {
    spdlog::warn("session {}: no backend reachable; closing the client connection", id_);
    co_return false;
  }
  backend_ = std::make_unique<MessageStream>(std::move(*socket));
  co_return true;
}

void Session::ReleaseLargeBuffers() {
  if (request_.capacity() > kRetainedBufferSize) std::vector<uint8_t>().swap(request_);
  if (reply_.capacity() > kRetainedBufferSize) std::vector<uint8_t>().swap(reply_);
}

}  // namespace remold
