// TLS contexts: what clients see (--tls-cert, --tls-key, --tls-client-ca)
// and how remold checks the backend (the URI's tls, tlsCAFile,
// tlsCertificateKeyFile, tlsAllowInvalidHostnames/Certificates).
//
// Built at start (an error stops remold) and rebuilt by Reload() on SIGHUP:
// a context that fails to rebuild is logged and the one in force stays. New
// connections take the current context; existing ones keep theirs.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "proxy/wire/backend_uri.h"

namespace boost::asio::ssl {
class context;
}

namespace remold {

struct ClientTlsFiles {
  std::string cert_file;       // PEM chain, the server certificate first
  std::string key_file;        // its private key (PEM)
  std::string client_ca_file;  // when set, clients must present a certificate it signed
  bool enabled() const { return !cert_file.empty(); }
};

class TlsContexts {
 public:
  TlsContexts(ClientTlsFiles client, TlsOptions backend);
  ~TlsContexts();

  // Builds every configured context from its files. Returns one line per
  // failure (empty: all built); a context that fails keeps the previous one.
  std::vector<std::string> Load();

  // Reload on SIGHUP: Load(), logging the outcome. True if all succeeded.
  bool Reload();

  // Null when clients speak plain TCP.
  std::shared_ptr<boost::asio::ssl::context> client() const { return client_.load(); }
  // Null when the backend is plain TCP.
  std::shared_ptr<boost::asio::ssl::context> backend() const { return backend_.load(); }
  const TlsOptions& backend_options() const { return backend_options_; }
  bool client_enabled() const { return client_files_.enabled(); }

 private:
  const ClientTlsFiles client_files_;
  const TlsOptions backend_options_;
  std::atomic<std::shared_ptr<boost::asio::ssl::context>> client_;
  std::atomic<std::shared_ptr<boost::asio::ssl::context>> backend_;
};

}  // namespace remold
