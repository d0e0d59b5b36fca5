#include "tools/common/wire_connection.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "proxy/wire/op_msg.h"
#include "tools/common/scram_login.h"

namespace remold {
namespace {

std::string OpenSslError() {
  const unsigned long code = ERR_get_error();
  if (code == 0) return "unknown TLS error";
  char text[256];
  ERR_error_string_n(code, text, sizeof text);
  ERR_clear_error();
  return text;
}

bool IsIpAddress(const std::string& host) {
  in6_addr v6;
  in_addr v4;
  return inet_pton(AF_INET, host.c_str(), &v4) == 1 || inet_pton(AF_INET6, host.c_str(), &v6) == 1;
}

std::string ErrorOf(const Doc& reply) {
  return FindString(reply.get(), "errmsg").value_or("no message") + " (code " +
         std::to_string(FindInteger(reply.get(), "code").value_or(0)) + ")";
}

}  // namespace

void WireConnection::Closer::operator()(int* fd) const {
  ::close(*fd);
  delete fd;
}
void WireConnection::Closer::operator()(ssl_ctx_st* context) const { SSL_CTX_free(context); }
void WireConnection::Closer::operator()(ssl_st* tls) const { SSL_free(tls); }

WireConnection::WireConnection(const HostAndPort& host, const BackendOptions& backend,
                               const BackendIdentity& identity, std::string_view app_name)
    : address_(HostPortText(host)) {
  Connect(host, backend.connect_timeout);
  if (backend.tls.enabled) StartTls(host, backend, identity);
  Doc hello, client, application, driver, os;
  BSON_APPEND_INT32(hello.mut(), "isMaster", 1);
  AppendString(application.mut(), "name", app_name);
  AppendString(driver.mut(), "name", "remold");
  AppendString(driver.mut(), "version", "1");
  AppendString(os.mut(), "type", "Linux");
  AppendDoc(client.mut(), "application", application);
  AppendDoc(client.mut(), "driver", driver);
  AppendDoc(client.mut(), "os", os);
  AppendDoc(hello.mut(), "client", client);
  hello_ = Run("admin", hello);
  if (!FindBool(hello_.get(), "ok").value_or(false)) Fail("hello refused: " + ErrorOf(hello_));
  if (identity.enabled) Authenticate(identity);
}

void WireConnection::Fail(const std::string& what) const { throw BackendError(address_ + ": " + what); }

void WireConnection::Connect(const HostAndPort& host, std::chrono::milliseconds timeout) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_family = AF_UNSPEC;
  addrinfo* found = nullptr;
  const int lookup = getaddrinfo(host.host.c_str(), std::to_string(host.port).c_str(), &hints, &found);
  if (lookup != 0) Fail(std::string("cannot resolve: ") + gai_strerror(lookup));
  std::string last_error = "no address";
  for (addrinfo* a = found; a && !socket_; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int flags = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      rc = ::poll(&p, 1, static_cast<int>(timeout.count()));
      int error = 0;
      socklen_t length = sizeof error;
      if (rc == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 && error == 0) {
        rc = 0;
      } else {
        errno = rc == 0 ? ETIMEDOUT : error;
        rc = -1;
      }
    }
    if (rc != 0) {
      last_error = std::strerror(errno);
      ::close(fd);
      continue;
    }
    fcntl(fd, F_SETFL, flags);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    socket_.reset(new int(fd));
  }
  freeaddrinfo(found);
  if (!socket_) Fail("cannot connect: " + last_error);
}

void WireConnection::StartTls(const HostAndPort& host, const BackendOptions& backend,
                              const BackendIdentity& identity) {
  const TlsOptions& tls = backend.tls;
  tls_context_.reset(SSL_CTX_new(TLS_client_method()));
  if (!tls_context_) Fail("TLS: " + OpenSslError());
  SSL_CTX* context = tls_context_.get();
  SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION);
  if (!tls.allow_invalid_certificates) {
    SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nullptr);
    const bool loaded = tls.ca_file.empty() ? SSL_CTX_set_default_verify_paths(context) == 1
                                            : SSL_CTX_load_verify_locations(context, tls.ca_file.c_str(), nullptr) == 1;
    if (!loaded) Fail("TLS: cannot load the CA file '" + tls.ca_file + "': " + OpenSslError());
  }
  const std::string& certificate =
      identity.enabled && identity.mechanism == AuthMechanism::kX509 && !identity.certificate_key_file.empty()
          ? identity.certificate_key_file
          : tls.certificate_key_file;
  if (!certificate.empty() &&
      (SSL_CTX_use_certificate_chain_file(context, certificate.c_str()) != 1 ||
       SSL_CTX_use_PrivateKey_file(context, certificate.c_str(), SSL_FILETYPE_PEM) != 1))
    Fail("TLS: cannot use the certificate and key of '" + certificate + "': " + OpenSslError());
  tls_.reset(SSL_new(context));
  if (!tls_) Fail("TLS: " + OpenSslError());
  SSL* session = tls_.get();
  if (!IsIpAddress(host.host)) SSL_set_tlsext_host_name(session, host.host.c_str());
  if (!tls.allow_invalid_certificates && !tls.allow_invalid_hostnames) {
    X509_VERIFY_PARAM* param = SSL_get0_param(session);
    const bool set = IsIpAddress(host.host) ? X509_VERIFY_PARAM_set1_ip_asc(param, host.host.c_str()) == 1
                                            : X509_VERIFY_PARAM_set1_host(param, host.host.c_str(), 0) == 1;
    if (!set) Fail("TLS: cannot check the name '" + host.host + "'");
  }
  SSL_set_fd(session, *socket_);
  if (SSL_connect(session) != 1) {
    const long verify = SSL_get_verify_result(session);
    Fail("TLS handshake failed: " +
         (verify != X509_V_OK ? std::string(X509_verify_cert_error_string(verify)) : OpenSslError()));
  }
}

void WireConnection::Authenticate(const BackendIdentity& identity) {
  const std::string mechanism(MechanismName(identity.mechanism));
  if (identity.mechanism == AuthMechanism::kX509) {
    Doc command;
    BSON_APPEND_INT32(command.mut(), "authenticate", 1);
    AppendString(command.mut(), "mechanism", mechanism);
    if (!identity.username.empty()) AppendString(command.mut(), "user", identity.username);
    Doc reply = Run("$external", command);
    if (!FindBool(reply.get(), "ok").value_or(false))
      throw BackendError(address_ + ": " + mechanism + " authentication failed: " + ErrorOf(reply),
                         static_cast<int32_t>(FindInteger(reply.get(), "code").value_or(0)));
    return;
  }
  const CommandRunner run = [this](const std::string& db, const Doc& command) { return Run(db, command); };
  if (std::optional<LoginFailure> failure =
          ScramLogin(run, identity.mechanism, identity.username, identity.password, identity.source))
    throw BackendError(address_ + ": " + mechanism + " authentication as '" + identity.username +
                           "' failed: " + failure->why,
                       failure->code);
}

void WireConnection::Send(const uint8_t* data, size_t size) {
  while (size > 0) {
    long sent = tls_ ? SSL_write(tls_.get(), data, static_cast<int>(size)) : ::send(*socket_, data, size, MSG_NOSIGNAL);
    if (sent <= 0) {
      if (!tls_ && sent < 0 && errno == EINTR) continue;
      Fail(tls_ ? "TLS write failed: " + OpenSslError() : std::string("write failed: ") + std::strerror(errno));
    }
    data += sent;
    size -= static_cast<size_t>(sent);
  }
}

void WireConnection::Receive(uint8_t* data, size_t size) {
  while (size > 0) {
    long got = tls_ ? SSL_read(tls_.get(), data, static_cast<int>(size)) : ::recv(*socket_, data, size, 0);
    if (got == 0) Fail("the server closed the connection");
    if (got < 0) {
      if (!tls_ && errno == EINTR) continue;
      Fail(tls_ ? "TLS read failed: " + OpenSslError() : std::string("read failed: ") + std::strerror(errno));
    }
    data += got;
    size -= static_cast<size_t>(got);
  }
}

Doc WireConnection::Run(const std::string& db, const Doc& command) {
  Doc body = command;
  AppendString(body.mut(), "$db", db);
  const int32_t request_id = next_request_id_++;
  std::vector<uint8_t> message = wire::EncodeOpMsg(request_id, 0, 0, body.bytes());
  Send(message.data(), message.size());
  std::vector<uint8_t> reply(wire::kHeaderSize);
  Receive(reply.data(), reply.size());
  const wire::MessageHeader header = wire::ReadHeader(reply);
  if (!wire::IsValidMessageLength(header.message_length) || header.message_length < wire::kHeaderSize)
    Fail("a reply of " + std::to_string(header.message_length) + " bytes");
  reply.resize(static_cast<size_t>(header.message_length));
  Receive(reply.data() + wire::kHeaderSize, reply.size() - wire::kHeaderSize);
  if (header.response_to != request_id || header.op_code != static_cast<int32_t>(wire::OpCode::kMsg))
    Fail("a reply that does not answer the command (opcode " + std::to_string(header.op_code) + ")");
  wire::OpMsgView view;
  if (std::optional<wire::WireError> error = wire::ParseOpMsg(reply, view)) Fail("a malformed reply");
  return Doc::FromBytes(view.body);
}

}  // namespace remold
