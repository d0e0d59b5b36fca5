#include "config/backend_credentials.h"

#include <yaml-cpp/yaml.h>

#include <cstdlib>

#include "config/config.h"

namespace remold {
namespace {

struct Fields {
  std::optional<std::string> username, password, mechanism, source, certificate_key_file;
};

// Fills in the defaults and checks that the fields make one identity;
// `where` names their origin in errors.
BackendIdentity Build(const Fields& fields, const std::string& where) {
  BackendIdentity identity;
  identity.enabled = true;
  if (fields.mechanism) {
    std::optional<AuthMechanism> mechanism = ParseMechanism(*fields.mechanism);
    if (!mechanism)
      throw ConfigError(where + ": unknown mechanism '" + *fields.mechanism +
                        "' (expected SCRAM-SHA-256, SCRAM-SHA-1 or MONGODB-X509)");
    identity.mechanism = *mechanism;
  }
  identity.username = fields.username.value_or("");
  identity.certificate_key_file = fields.certificate_key_file.value_or("");
  if (identity.mechanism == AuthMechanism::kX509) {
    if (fields.password) throw ConfigError(where + ": MONGODB-X509 takes no password (the certificate is the proof)");
    identity.source = fields.source.value_or("$external");
    if (identity.source != "$external")
      throw ConfigError(where + ": MONGODB-X509 authenticates against $external, not '" + identity.source + "'");
    return identity;
  }
  if (identity.username.empty()) throw ConfigError(where + ": " + std::string(MechanismName(identity.mechanism)) + " needs a username");
  if (!fields.password || fields.password->empty())
    throw ConfigError(where + ": " + std::string(MechanismName(identity.mechanism)) + " needs a password");
  if (fields.certificate_key_file)
    throw ConfigError(where + ": certificate_key_file is for MONGODB-X509 (the backend URI's tlsCertificateKeyFile "
                      "serves TLS)");
  identity.password = *fields.password;
  identity.source = fields.source.value_or("admin");
  if (identity.source.empty()) throw ConfigError(where + ": source must name a database");
  return identity;
}

BackendIdentity FromFile(const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    throw ConfigError("backend_credentials: cannot read '" + path + "'");
  } catch (const YAML::Exception& e) {
    // e.msg says what is wrong with the syntax, never the value.
    throw ConfigError(path + ":" + std::to_string(e.mark.line + 1) + ": invalid YAML: " + e.msg);
  }
  if (!root.IsMap()) throw ConfigError(path + ": expected a mapping (username, password, mechanism, source)");
  Fields fields;
  for (const auto& entry : root) {
    const std::string line = path + ":" + std::to_string(entry.first.Mark().line + 1);
    const std::string key = entry.first.IsScalar() ? entry.first.as<std::string>() : "";
    std::optional<std::string>* slot = key == "username"               ? &fields.username
                                       : key == "password"             ? &fields.password
                                       : key == "mechanism"            ? &fields.mechanism
                                       : key == "source"               ? &fields.source
                                       : key == "certificate_key_file" ? &fields.certificate_key_file
                                                                       : nullptr;
    if (!slot)
      throw ConfigError(line + ": unknown key '" + key +
                        "' (expected username, password, mechanism, source, certificate_key_file)");
    if (!entry.second.IsScalar()) throw ConfigError(line + ": key '" + key + "': expected a single value");
    *slot = entry.second.as<std::string>();
  }
  return Build(fields, path);
}

}  // namespace

std::optional<std::string> ProcessEnvironment(const char* name) {
  const char* value = std::getenv(name);
  if (!value) return std::nullopt;
  return std::string(value);
}

BackendIdentity LoadBackendIdentity(const std::string& file, const Environment& env) {
  if (!file.empty()) return FromFile(file);
  Fields fields{env("REMOLD_BACKEND_USERNAME"), env("REMOLD_BACKEND_PASSWORD"),
                env("REMOLD_BACKEND_AUTH_MECHANISM"), env("REMOLD_BACKEND_AUTH_SOURCE"),
                env("REMOLD_BACKEND_CERTIFICATE_KEY_FILE")};
  if (!fields.username && !fields.password && !fields.mechanism && !fields.certificate_key_file) {
    if (fields.source) throw ConfigError("REMOLD_BACKEND_AUTH_SOURCE is set, but no REMOLD_BACKEND_USERNAME");
    return BackendIdentity{};
  }
  return Build(fields, "the REMOLD_BACKEND_* environment");
}

}  // namespace remold
