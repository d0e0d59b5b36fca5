// Opens a backend connection: the URI's hosts in order (or one member); the first that
// accepts the TCP connection and, with tls=true, completes the TLS handshake
// (certificate verified against tlsCAFile or the system's CAs, host name
// checked unless tlsAllowInvalidHostnames) within the connect timeout wins.
// Each failure is logged with its reason.
#pragma once

#include <memory>
#include <string>

#include "proxy/asio.h"
#include "proxy/message_stream.h"
#include "proxy/wire/backend_uri.h"

namespace remold {

// A backend connection, or why none could be made: one line that starts
// with the host ("db1:27017: cannot connect: Connection refused").
struct BackendConnection {
  std::unique_ptr<MessageStream> stream;
  std::string error;
};

// One host, logging nothing: for a caller that reports failures itself
// (the readiness probe, which logs only changes).
awaitable<BackendConnection> OpenBackendHost(const HostAndPort& host, const BackendOptions& options,
                                             const std::shared_ptr<asio::ssl::context>& tls);

// `tls` is the backend's TLS context (TlsContexts::backend()); null for a
// plain backend. Returns null when no host could be reached.
awaitable<std::unique_ptr<MessageStream>> ConnectBackend(
    const BackendOptions& options, std::shared_ptr<asio::ssl::context> tls);

// The same for one host (a member the topology monitor found).
awaitable<std::unique_ptr<MessageStream>> ConnectBackendHost(
    const HostAndPort& host, const BackendOptions& options, std::shared_ptr<asio::ssl::context> tls);

}  // namespace remold
