// Where remold's own identity on the backend (proxy/wire/backend_identity.h)
// comes from: a YAML file, named by the `backend_credentials` key or
// --backend-credentials FILE,
//
//   username: remold
//   password: s3cret
//   mechanism: SCRAM-SHA-256     # the default; SCRAM-SHA-1, or MONGODB-X509
//   source: admin                # the default; $external for MONGODB-X509
//   # certificate_key_file: /etc/remold/remold-x509.pem   (MONGODB-X509)
//
// or else the environment: REMOLD_BACKEND_USERNAME, REMOLD_BACKEND_PASSWORD,
// REMOLD_BACKEND_AUTH_MECHANISM, REMOLD_BACKEND_AUTH_SOURCE and
// REMOLD_BACKEND_CERTIFICATE_KEY_FILE. Never the command line (which `ps`
// shows to every user), and no error message quotes the password.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "proxy/wire/backend_identity.h"

namespace remold {

// Reads one environment variable (a function, so that tests can give their own).
using Environment = std::function<std::optional<std::string>(const char* name)>;
std::optional<std::string> ProcessEnvironment(const char* name);

// The identity from `file` when it is not empty, else from `env`; none
// when neither names one. Throws ConfigError naming the file, line and key
// (or the variable) of a mistake.
BackendIdentity LoadBackendIdentity(const std::string& file, const Environment& env);

}  // namespace remold
