// MessageStream over TLS: the handshake, and the read/write coroutines
// instantiated for the TLS stream (see message_stream.cc for why here).
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <boost/asio/ssl.hpp>

#include "proxy/message_stream.h"
#include "proxy/message_stream_io.h"

namespace remold {
namespace ssl = asio::ssl;
namespace {

constexpr size_t kReadAheadSize = 64 * 1024;

std::string HandshakeFailure(SSL* ssl, const boost::system::error_code& ec) {
  long verify = SSL_get_verify_result(ssl);
  if (verify != X509_V_OK)
    return std::string("certificate verify failed: ") + X509_verify_cert_error_string(verify);
  if (ec == asio::error::eof || ec == ssl::error::stream_truncated)
    return "the peer closed the connection during the handshake";
  if (ec == asio::error::operation_aborted || ec == asio::error::bad_descriptor)
    return "closed during the handshake";
  return ec.message();
}

}  // namespace

struct MessageStream::Tls {
  Tls(Socket& socket, std::shared_ptr<ssl::context> ctx)
      : context(std::move(ctx)), stream(socket, *context) {}
  std::shared_ptr<ssl::context> context;  // outlives the stream that uses it
  ssl::stream<Socket&> stream;
};

// Here, where Tls is complete (unique_ptr<Tls>).
MessageStream::MessageStream(Socket socket)
    : socket_(std::move(socket)), buffer_(kReadAheadSize) {
  boost::system::error_code ignored;
  socket_.set_option(tcp::no_delay(true), ignored);
}

MessageStream::~MessageStream() = default;

awaitable<std::string> MessageStream::StartTls(std::shared_ptr<ssl::context> context, TlsRole role,
                                               const std::string& host, bool verify_host) {
  if (tls_ || begin_ != end_) co_return "TLS must start before any other byte";
  tls_ = std::make_unique<Tls>(socket_, std::move(context));
  SSL* handle = tls_->stream.native_handle();
  SSL_set_mode(handle, SSL_MODE_RELEASE_BUFFERS);  // an idle connection keeps no TLS buffers
  if (role == TlsRole::kClient && !host.empty()) {
    boost::system::error_code not_address;
    asio::ip::make_address(host, not_address);
    if (not_address) SSL_set_tlsext_host_name(handle, host.c_str());
    if (verify_host) {
      X509_VERIFY_PARAM* param = SSL_get0_param(handle);
      if (!not_address) {
        X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str());
      } else {
        X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
        X509_VERIFY_PARAM_set1_host(param, host.c_str(), 0);
      }
    }
  }
  boost::system::error_code ec;
  co_await tls_->stream.async_handshake(
      role == TlsRole::kServer ? ssl::stream_base::server : ssl::stream_base::client,
      asio::redirect_error(use_awaitable, ec));
  if (ec) co_return HandshakeFailure(handle, ec);
  co_return std::string();
}

using TlsStream = ssl::stream<Socket&>;

template <>
TlsStream& MessageStream::StreamOf<TlsStream>() {
  return tls_->stream;
}

awaitable<ReadStatus> MessageStream::ReadTls(std::vector<uint8_t>& out) {
  return ReadFrom<TlsStream>(out);
}

awaitable<bool> MessageStream::WriteTls(std::span<const uint8_t> message) {
  return WriteTo<TlsStream>(message);
}

awaitable<bool> MessageStream::DiscardRejectedTls() { return DiscardRejectedFrom<TlsStream>(); }

// Bytes read from the socket go into OpenSSL at once (Asio's TLS stream
// hands them over in the same completion): a record not yet decrypted whole
// is in the SSL object's read buffer or in the BIO it reads from.
bool MessageStream::TlsHasPendingInput() {
  SSL* handle = tls_->stream.native_handle();
  return SSL_has_pending(handle) == 1 || BIO_pending(SSL_get_rbio(handle)) > 0;
}

}  // namespace remold
