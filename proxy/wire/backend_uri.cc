#include "proxy/wire/backend_uri.h"

#include <algorithm>
#include <charconv>

namespace remold {
namespace {

constexpr std::string_view kScheme = "mongodb://";

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::optional<bool> ParseBool(std::string_view value) {
  if (value == "true") return true;
  if (value == "false") return false;
  return std::nullopt;
}

// "zstd,snappy" -> {kZstd, kSnappy}; a name remold cannot use is an error.
bool ParseCompressors(std::string_view value, std::vector<wire::Compressor>& out, std::string& error) {
  out.clear();
  for (bool more = true; more;) {
    const size_t comma = value.find(',');
    more = comma != std::string_view::npos;
    const std::string_view name = value.substr(0, comma);
    std::optional<wire::Compressor> c = wire::CompressorFromName(name);
    if (!c || *c == wire::Compressor::kNoop) {
      error = "backend URI option 'compressors' names '" + std::string(name) +
              "', which remold cannot use (it can use snappy, zlib and zstd)";
      return false;
    }
    if (std::find(out.begin(), out.end(), *c) == out.end()) out.push_back(*c);
    if (more) value = value.substr(comma + 1);
  }
  return true;
}

bool ApplyOption(std::string_view key, std::string_view value, BackendOptions& out,
                 std::string& error) {
  std::string name = Lower(key);
  auto boolean = [&](bool& field) {
    std::optional<bool> b = ParseBool(value);
    if (!b) error = "backend URI option '" + std::string(key) + "' must be true or false";
    else field = *b;
    return b.has_value();
  };
  if (name == "tls" || name == "ssl") return boolean(out.tls.enabled);
  if (name == "tlscafile") {
    out.tls.ca_file = value;
    return true;
  }
  if (name == "tlscertificatekeyfile") {
    out.tls.certificate_key_file = value;
    return true;
  }
  if (name == "tlsallowinvalidhostnames") return boolean(out.tls.allow_invalid_hostnames);
  if (name == "tlsallowinvalidcertificates") return boolean(out.tls.allow_invalid_certificates);
  if (name == "tlsinsecure") {
    bool insecure = false;
    if (!boolean(insecure)) return false;
    out.tls.allow_invalid_hostnames = out.tls.allow_invalid_certificates = insecure;
    return true;
  }
  auto milliseconds = [&](std::chrono::milliseconds& field, int minimum) {
    int ms = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), ms);
    if (ec != std::errc() || end != value.data() + value.size() || ms < minimum) {
      error = "backend URI option '" + std::string(key) + "' must be an integer of at least " +
              std::to_string(minimum);
      return false;
    }
    field = std::chrono::milliseconds(ms);
    return true;
  };
  if (name == "connecttimeoutms") return milliseconds(out.connect_timeout, 1);
  // The Server Discovery and Monitoring specification's floor.
  if (name == "heartbeatfrequencyms") return milliseconds(out.heartbeat, 500);
  if (name == "serverselectiontimeoutms") return milliseconds(out.server_selection_timeout, 1);
  if (name == "waitqueuetimeoutms") return milliseconds(out.wait_queue_timeout, 1);
  if (name == "directconnection") return boolean(out.direct_connection);
  if (name == "replicaset") {
    if (value.empty()) {
      error = "backend URI option 'replicaSet' is empty";
      return false;
    }
    out.replica_set = value;
    return true;
  }
  if (name == "appname") {
    out.app_name = value;
    return true;
  }
  if (name == "compressors") return ParseCompressors(value, out.compressors, error);
  error = "backend URI option '" + std::string(key) +
          "' is not supported (supported: tls, tlsCAFile, tlsCertificateKeyFile, "
          "tlsAllowInvalidHostnames, tlsAllowInvalidCertificates, tlsInsecure, "
          "connectTimeoutMS, heartbeatFrequencyMS, serverSelectionTimeoutMS, waitQueueTimeoutMS, directConnection, "
          "replicaSet, appName, compressors)";
  return false;
}

}  // namespace

std::string HostPortText(const HostAndPort& host) {
  const bool v6 = host.host.find(':') != std::string::npos;
  return (v6 ? "[" + host.host + "]" : host.host) + ":" + std::to_string(host.port);
}

std::optional<HostAndPort> ParseHostAndPort(std::string_view text, std::string& error) {
  HostAndPort out;
  std::string_view port_text;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos) {
      error = "'" + std::string(text) + "' has an unclosed '['";
      return std::nullopt;
    }
    out.host = text.substr(1, close - 1);
    std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') {
        error = "'" + std::string(text) + "' is not [host]:port";
        return std::nullopt;
      }
      port_text = rest.substr(1);
    }
  } else {
    size_t colon = text.rfind(':');
    out.host = text.substr(0, colon);
    if (colon != std::string_view::npos) port_text = text.substr(colon + 1);
  }
  if (out.host.empty()) {
    error = "'" + std::string(text) + "' has no host";
    return std::nullopt;
  }
  if (text.front() != '[' && out.host.find(':') != std::string::npos) {
    error = "'" + std::string(text) + "' is not host:port (write IPv6 addresses as [addr]:port)";
    return std::nullopt;
  }
  if (!port_text.empty() || text.back() == ':') {
    unsigned port = 0;
    auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (ec != std::errc() || end != port_text.data() + port_text.size() || port > 65535) {
      error = "'" + std::string(text) + "' has an invalid port";
      return std::nullopt;
    }
    out.port = static_cast<uint16_t>(port);
  }
  return out;
}

std::optional<BackendOptions> ParseBackendUri(std::string_view uri, std::string& error) {
  if (uri.substr(0, kScheme.size()) != kScheme) {
    error = "backend URI must start with mongodb:// (got '" + std::string(uri) + "')";
    return std::nullopt;
  }
  std::string_view rest = uri.substr(kScheme.size());
  if (rest.substr(0, rest.find('?')).find('@') != std::string_view::npos) {
    error = "backend URI must not carry credentials: each client authenticates as itself "
            "through remold";
    return std::nullopt;
  }
  size_t path = rest.find_first_of("/?");
  std::string_view host_list = rest.substr(0, path);
  std::string_view query;
  if (path != std::string_view::npos) {
    std::string_view tail = rest.substr(path);
    size_t q = tail.find('?');
    if (q != std::string_view::npos) query = tail.substr(q + 1);
    std::string_view db = tail.substr(0, q);
    if (db.size() > 1) {
      error = "backend URI must not name a database ('" + std::string(db.substr(1)) +
              "'): each client names its own";
      return std::nullopt;
    }
  }
  BackendOptions out;
  while (!host_list.empty()) {
    size_t comma = host_list.find(',');
    std::optional<HostAndPort> host = ParseHostAndPort(host_list.substr(0, comma), error);
    if (!host) {
      error = "backend URI host " + error;
      return std::nullopt;
    }
    if (host->port == 0) {
      error = "backend URI host '" + host->host + ":0' has an invalid port";
      return std::nullopt;
    }
    out.hosts.push_back(*host);
    host_list = comma == std::string_view::npos ? "" : host_list.substr(comma + 1);
  }
  if (out.hosts.empty()) {
    error = "backend URI names no host";
    return std::nullopt;
  }
  const size_t host_count = out.hosts.size();

  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? "" : query.substr(amp + 1);
    if (pair.empty()) continue;
    size_t eq = pair.find('=');
    if (eq == std::string_view::npos) {
      error = "backend URI option '" + std::string(pair) + "' has no value";
      return std::nullopt;
    }
    if (!ApplyOption(pair.substr(0, eq), pair.substr(eq + 1), out, error)) return std::nullopt;
  }
  if (out.direct_connection && host_count > 1) {
    error = "backend URI option 'directConnection=true' names one host (got " +
            std::to_string(host_count) + ")";
    return std::nullopt;
  }
  if (out.direct_connection && !out.replica_set.empty()) {
    error = "backend URI options 'directConnection=true' and 'replicaSet' exclude each other";
    return std::nullopt;
  }
  return out;
}

}  // namespace remold
