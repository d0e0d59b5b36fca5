// The backend as a `mongodb://` URI: hosts and the connection options remold
// honours, parsed and validated up front.
//
// remold relays each client's own authentication, so the URI carries no
// credentials; an option remold does not know is an error, never ignored.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "proxy/wire/compression.h"

namespace remold {

struct HostAndPort {
  std::string host;
  uint16_t port = 27017;
};

struct TlsOptions {
  bool enabled = false;
  std::string ca_file;                 // tlsCAFile
  std::string certificate_key_file;    // tlsCertificateKeyFile
  bool allow_invalid_hostnames = false;
  bool allow_invalid_certificates = false;
};

struct BackendOptions {
  std::vector<HostAndPort> hosts;
  TlsOptions tls;
  std::chrono::milliseconds connect_timeout{10'000};
  // directConnection=true: no monitoring; the hosts in order, first
  // reachable wins. Otherwise the backend is monitored and routed to as a
  // standalone, a replica set or mongos (proxy/routing/topology_monitor.h).
  bool direct_connection = false;
  std::string replica_set;  // replicaSet: the set's name ("" discovers it)
  std::chrono::milliseconds heartbeat{10'000};                 // heartbeatFrequencyMS
  std::chrono::milliseconds server_selection_timeout{30'000};  // serverSelectionTimeoutMS
  std::string app_name;                                        // appName
  // waitQueueTimeoutMS: in pooled mode (--backend-pool-size), how long a
  // request waits for a pooled connection before it is refused.
  std::chrono::milliseconds wait_queue_timeout{10'000};
  // compressors=zstd,snappy: offered to the backend, in this order, on
  // every backend connection (proxy/wire/backend_compression.h). Empty: none.
  std::vector<wire::Compressor> compressors;
};

// Parses "mongodb://host[:port][,host[:port]...][/][?opt=v&...]". On error
// returns nullopt and sets `error` to one line naming what is wrong.
std::optional<BackendOptions> ParseBackendUri(std::string_view uri, std::string& error);

// "host:port", or "[v6addr]:port" for an IPv6 address: as URIs write it.
std::string HostPortText(const HostAndPort& host);

// "host:port" or "[v6addr]:port"; port 0 is accepted (a listener's "any").
std::optional<HostAndPort> ParseHostAndPort(std::string_view text, std::string& error);

}  // namespace remold
