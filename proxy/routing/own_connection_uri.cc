#include "proxy/routing/own_connection_uri.h"

#include <mongoc/mongoc.h>

#include <cstdint>

namespace remold {
namespace {

// Sets remold's identity on `uri`; false with `error` set when it cannot work.
bool SetIdentity(mongoc_uri_t* uri, const BackendOptions& backend, const BackendIdentity& identity,
                 std::string& error) {
  if (!identity.enabled) return true;
  const std::string mechanism(MechanismName(identity.mechanism));
  if (identity.mechanism == AuthMechanism::kX509) {
    if (!backend.tls.enabled) {
      error = "MONGODB-X509 authenticates with a TLS client certificate: the backend URI needs tls=true";
      return false;
    }
    const std::string& certificate =
        identity.certificate_key_file.empty() ? backend.tls.certificate_key_file : identity.certificate_key_file;
    if (certificate.empty()) {
      error = "MONGODB-X509 needs a client certificate: certificate_key_file in the credentials, or "
              "tlsCertificateKeyFile in the backend URI";
      return false;
    }
    mongoc_uri_set_option_as_utf8(uri, MONGOC_URI_TLSCERTIFICATEKEYFILE, certificate.c_str());
  }
  if (!mongoc_uri_set_auth_mechanism(uri, mechanism.c_str()) ||
      !mongoc_uri_set_auth_source(uri, identity.source.c_str()) ||
      (!identity.username.empty() && !mongoc_uri_set_username(uri, identity.username.c_str())) ||
      (identity.mechanism != AuthMechanism::kX509 && !mongoc_uri_set_password(uri, identity.password.c_str()))) {
    error = "the backend credentials are not valid UTF-8";
    return false;
  }
  return true;
}

}  // namespace

void MongocUriDeleter::operator()(mongoc_uri_t* uri) const { mongoc_uri_destroy(uri); }

MongocUriPtr OwnConnectionUri(const BackendOptions& backend, const BackendIdentity& identity,
                              std::string_view app_name, std::string& error) {
  std::string text = "mongodb://";
  for (size_t i = 0; i < backend.hosts.size(); ++i) text += (i ? "," : "") + HostPortText(backend.hosts[i]);
  text += "/";
  bson_error_t bson_error;
  MongocUriPtr uri(mongoc_uri_new_with_error(text.c_str(), &bson_error));
  if (!uri) {
    error = bson_error.message;
    return nullptr;
  }
  mongoc_uri_t* u = uri.get();
  mongoc_uri_set_option_as_bool(u, MONGOC_URI_DIRECTCONNECTION, backend.direct_connection);
  if (!backend.replica_set.empty()) mongoc_uri_set_option_as_utf8(u, MONGOC_URI_REPLICASET, backend.replica_set.c_str());
  mongoc_uri_set_option_as_int32(u, MONGOC_URI_CONNECTTIMEOUTMS, static_cast<int32_t>(backend.connect_timeout.count()));
  mongoc_uri_set_option_as_int32(u, MONGOC_URI_SERVERSELECTIONTIMEOUTMS,
                                 static_cast<int32_t>(backend.server_selection_timeout.count()));
  mongoc_uri_set_option_as_utf8(u, MONGOC_URI_APPNAME, std::string(app_name).c_str());
  if (backend.tls.enabled) {
    mongoc_uri_set_option_as_bool(u, MONGOC_URI_TLS, true);
    if (!backend.tls.ca_file.empty()) mongoc_uri_set_option_as_utf8(u, MONGOC_URI_TLSCAFILE, backend.tls.ca_file.c_str());
    if (!backend.tls.certificate_key_file.empty())
      mongoc_uri_set_option_as_utf8(u, MONGOC_URI_TLSCERTIFICATEKEYFILE, backend.tls.certificate_key_file.c_str());
    if (backend.tls.allow_invalid_hostnames) mongoc_uri_set_option_as_bool(u, MONGOC_URI_TLSALLOWINVALIDHOSTNAMES, true);
    if (backend.tls.allow_invalid_certificates)
      mongoc_uri_set_option_as_bool(u, MONGOC_URI_TLSALLOWINVALIDCERTIFICATES, true);
  }
  if (!SetIdentity(u, backend, identity, error)) return nullptr;
  return uri;
}

}  // namespace remold
