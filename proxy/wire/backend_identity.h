// remold's own identity on the backend: the user that the connections
// remold opens for itself authenticate as (the start-up count of documents
// not in a rule's form, `remold check --backend`, `remold migrate` and
// `remold reconcile`; the topology monitor's hello needs none). Clients
// never use it: each one authenticates as itself through remold.
//
// It comes from a file or the environment (config/backend_credentials.h),
// never from the command line, and nothing remold prints shows the
// password.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace remold {

enum class AuthMechanism { kScramSha256, kScramSha1, kX509 };

struct BackendIdentity {
  bool enabled = false;  // false: remold's own connections do not authenticate
  AuthMechanism mechanism = AuthMechanism::kScramSha256;
  std::string username;  // MONGODB-X509: may be empty (the server reads the certificate's subject)
  std::string password;  // SCRAM only
  std::string source = "admin";  // the authentication database; MONGODB-X509: $external
  // MONGODB-X509: the client certificate and key (PEM) remold's own
  // connections present; empty: the backend URI's tlsCertificateKeyFile.
  std::string certificate_key_file;
};

// "SCRAM-SHA-256", "SCRAM-SHA-1", "MONGODB-X509": as connection strings name them.
std::string_view MechanismName(AuthMechanism mechanism);
// The mechanism a connection string's name stands for (case-insensitively).
std::optional<AuthMechanism> ParseMechanism(std::string_view name);

// "SCRAM-SHA-256 as 'remold' (admin)", or "none": for logs, never the password.
std::string Describe(const BackendIdentity& identity);

}  // namespace remold
