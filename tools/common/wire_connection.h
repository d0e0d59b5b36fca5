// A blocking connection to one backend server for remold's own work
// (tools/common/backend_client.h): TCP with the backend URI's TLS options,
// one OP_MSG command at a time, authenticated as remold's own identity
// (proxy/wire/backend_identity.h): SCRAM by tools/common/scram.h, MONGODB-X509
// by the certificate it presents.
//
// Every failure of the link throws BackendError; a command the server
// refuses comes back as its reply (ok: 0), for the caller to read.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/doc.h"
#include "proxy/wire/backend_identity.h"
#include "proxy/wire/backend_uri.h"
#include "tools/common/backend_error.h"

struct ssl_st;
struct ssl_ctx_st;

namespace remold {

class WireConnection {
 public:
  // Connects to `host`, says hello as `app_name` and authenticates.
  WireConnection(const HostAndPort& host, const BackendOptions& backend, const BackendIdentity& identity,
                 std::string_view app_name);
  WireConnection(const WireConnection&) = delete;
  WireConnection& operator=(const WireConnection&) = delete;

  // The reply of `command` (no $db: it is added) run on `db`.
  Doc Run(const std::string& db, const Doc& command);

  // The server's hello reply.
  const Doc& hello() const { return hello_; }

 private:
  void Connect(const HostAndPort& host, std::chrono::milliseconds timeout);
  void StartTls(const HostAndPort& host, const BackendOptions& backend, const BackendIdentity& identity);
  void Authenticate(const BackendIdentity& identity);
  void Send(const uint8_t* data, size_t size);
  void Receive(uint8_t* data, size_t size);
  [[noreturn]] void Fail(const std::string& what) const;

  struct Closer {
    void operator()(int* fd) const;
    void operator()(ssl_ctx_st* context) const;
    void operator()(ssl_st* tls) const;
  };

  std::string address_;  // host:port, for messages
  std::unique_ptr<int, Closer> socket_;  // the descriptor; the TLS session below (declared after) goes first
  std::unique_ptr<ssl_ctx_st, Closer> tls_context_;
  std::unique_ptr<ssl_st, Closer> tls_;
  int32_t next_request_id_ = 1;
  Doc hello_;
};

}  // namespace remold
