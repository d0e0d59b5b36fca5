#include "proxy/tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <spdlog/spdlog.h>

#include <boost/asio/ssl.hpp>
#include <stdexcept>

namespace remold {
namespace ssl = boost::asio::ssl;
namespace {

struct TlsError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void Check(const boost::system::error_code& ec, const std::string& what) {
  if (ec) throw TlsError(what + ": " + ec.message());
}

void LoadCertificateAndKey(ssl::context& ctx, const std::string& cert_file,
                           const std::string& key_file, const std::string& cert_name,
                           const std::string& key_name) {
  boost::system::error_code ec;
  ctx.use_certificate_chain_file(cert_file, ec);
  Check(ec, cert_name + ": cannot load a certificate chain from '" + cert_file + "'");
  ctx.use_private_key_file(key_file, ssl::context::pem, ec);
  if (ec && ec.category() == boost::asio::error::get_ssl_category() &&
      ERR_GET_REASON(static_cast<unsigned long>(ec.value())) == X509_R_KEY_VALUES_MISMATCH)
    ec = {};  // said below, more plainly
  Check(ec, key_name + ": cannot load a private key from '" + key_file + "'");
  if (SSL_CTX_check_private_key(ctx.native_handle()) != 1)
    throw TlsError(key_name + ": the key in '" + key_file + "' does not match the certificate in '" +
                   cert_file + "'");
}

std::shared_ptr<ssl::context> BuildClientContext(const ClientTlsFiles& files) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  SSL_CTX* handle = ctx->native_handle();
  SSL_CTX_set_min_proto_version(handle, TLS1_2_VERSION);
  ctx->set_options(ssl::context::default_workarounds | ssl::context::single_dh_use);
  LoadCertificateAndKey(*ctx, files.cert_file, files.key_file, "tls_cert", "tls_key");
  if (!files.client_ca_file.empty()) {
    boost::system::error_code ec;
    ctx->load_verify_file(files.client_ca_file, ec);
    Check(ec, "tls_client_ca: cannot load CA certificates from '" + files.client_ca_file + "'");
    // Tell clients which CAs we accept, so they pick the right certificate.
    if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(files.client_ca_file.c_str()))
      SSL_CTX_set_client_CA_list(handle, names);
    ctx->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
    static const unsigned char kSessionContext[] = "remold";
    SSL_CTX_set_session_id_context(handle, kSessionContext, sizeof(kSessionContext) - 1);
  }
  return ctx;
}

std::shared_ptr<ssl::context> BuildBackendContext(const TlsOptions& options) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
  SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
  boost::system::error_code ec;
  if (options.allow_invalid_certificates) {
    ctx->set_verify_mode(ssl::verify_none);
  } else {
    ctx->set_verify_mode(ssl::verify_peer);
    if (!options.ca_file.empty()) {
      ctx->load_verify_file(options.ca_file, ec);
      Check(ec, "backend: tlsCAFile: cannot load CA certificates from '" + options.ca_file + "'");
    } else {
      ctx->set_default_verify_paths(ec);
      Check(ec, "backend: cannot load the system's CA certificates (set tlsCAFile)");
    }
  }
  if (!options.certificate_key_file.empty()) {
    LoadCertificateAndKey(*ctx, options.certificate_key_file, options.certificate_key_file,
                          "backend: tlsCertificateKeyFile", "backend: tlsCertificateKeyFile");
  }
  return ctx;
}

}  // namespace

TlsContexts::TlsContexts(ClientTlsFiles client, TlsOptions backend)
    : client_files_(std::move(client)), backend_options_(std::move(backend)) {}

TlsContexts::~TlsContexts() = default;

std::vector<std::string> TlsContexts::Load() {
  std::vector<std::string> errors;
  if (client_files_.enabled()) {
    try {
      client_.store(BuildClientContext(client_files_));
    } catch (const TlsError& e) {
      errors.push_back(e.what());
    }
  }
  if (backend_options_.enabled) {
    try {
      backend_.store(BuildBackendContext(backend_options_));
    } catch (const TlsError& e) {
      errors.push_back(e.what());
    }
  }
  return errors;
}

bool TlsContexts::Reload() {
  if (!client_files_.enabled() && !backend_options_.enabled) return true;
  std::vector<std::string> errors = Load();
  for (const std::string& error : errors)
    spdlog::error("TLS reload: {}; the certificates in force stay", error);
  if (errors.empty()) spdlog::info("TLS certificates reloaded; new connections use them");
  return errors.empty();
}

}  // namespace remold
