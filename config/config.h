// remold's configuration: a YAML file and command-line flags, flags winning.
//
// Every key is validated when loaded; a mistake throws ConfigError with one
// line that names the bad key or flag and what was expected.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "proxy/wire/backend_identity.h"
#include "proxy/wire/backend_uri.h"
#include "rules/namespace.h"

namespace remold {

class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Config {
  HostAndPort listen{"127.0.0.1", 27018};
  std::string backend_uri;          // required
  BackendOptions backend;           // parsed from backend_uri
  // remold's own user on the backend (config/backend_credentials.h): from
  // this file, or else from the environment.
  std::string backend_credentials_file;
  BackendIdentity identity;
  std::string rules_dir;            // optional
  std::string log_level = "info";
  int threads = 0;                  // 0: one per hardware thread
  std::chrono::milliseconds drain_timeout{30'000};

  // Client-side TLS: both files, or neither (plain TCP). With a client CA,
  // clients must present a certificate it signed.
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_client_ca_file;

  std::optional<HostAndPort> metrics_listen;  // /metrics, /healthz, /readyz
  std::string log_format = "text";            // text or json
  std::chrono::milliseconds slow_op{0};       // 0: no slow-operation log

  // Limits. A client past one gets a MongoDB error or a clean close; the
  // others never notice.
  int max_connections = 4096;                 // 0: unlimited
  // Pooled mode (proxy/backend_pool.h): at most this many backend
  // connections per member, shared by all clients; 0: one per client.
  int backend_pool_size = 0;
  int32_t max_message_size = 48'000'000;      // bytes, at most the wire limit
  std::chrono::milliseconds idle_timeout{0};  // 0: connections may idle forever

  // Whether remold agrees to compress the client link when a driver offers
  // it. Off by default: a sidecar's client link is loopback, where
  // compressing costs CPU and saves nothing; what the driver offered is
  // offered to the backend instead (bench/pass_through/compression_run.py).
  bool client_compression = false;

  // The group of sidecars that must run rules that agree (app/sidecars.h),
  // and where their heartbeats live; empty: no check.
  std::string sidecars_group;
  Namespace sidecars_registry{"remold", "sidecars"};
};

// Parses `serve` arguments (argv after "serve"). Reads --config FILE first,
// then applies the other flags over it, then validates the result.
Config LoadServeConfig(const std::vector<std::string>& args);

// The flags of `remold serve`, for --help.
std::string ServeUsage();

}  // namespace remold
