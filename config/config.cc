#include "config/config.h"

#include <yaml-cpp/yaml.h>

#include <array>
#include <charconv>
#include <filesystem>
#include <optional>

#include "config/backend_credentials.h"
#include "proxy/routing/own_connection_uri.h"

namespace remold {
namespace {

constexpr std::array<std::string_view, 6> kLogLevels = {"trace", "debug", "info",
                                                        "warn",  "error", "off"};

struct Setting {
  std::string_view file_key;
  std::string_view flag;
  std::string_view help;
};

constexpr std::array<Setting, 21> kSettings = {{
    {"listen", "--listen", "HOST:PORT   address to accept clients on (default 127.0.0.1:27018)"},
    {"backend", "--backend", "URI         backend, mongodb://host[:port][,...][?options] (required)"},
    {"backend_credentials", "--backend-credentials", "FILE  remold's own user on the backend (YAML; see docs/operations.md)"},
    {"rules", "--rules", "DIR         rules directory (one YAML file per collection)"},
    {"log_level", "--log-level", "LEVEL       trace, debug, info, warn, error or off (default info)"},
    {"threads", "--threads", "N           worker threads (default: one per core)"},
    {"drain_timeout_ms", "--drain-timeout-ms", "MS    how long SIGTERM waits for in-flight requests (default 30000)"},
    {"tls_cert", "--tls-cert", "FILE      client-side TLS: the server certificate chain (PEM)"},
    {"tls_key", "--tls-key", "FILE       client-side TLS: its private key (PEM)"},
    {"tls_client_ca", "--tls-client-ca", "FILE  require client certificates signed by this CA (PEM)"},
    {"metrics_listen", "--metrics-listen", "HOST:PORT  serve /metrics, /healthz and /readyz over HTTP"},
    {"log_format", "--log-format", "FORMAT   text (default) or json, one object per line"},
    {"slow_op_ms", "--slow-op-ms", "MS         log operations slower than this (default 0: off)"},
    {"backend_pool_size", "--backend-pool-size", "N  share at most N backend connections per member between all clients (default 0: one per client; docs/operations.md)"},
    {"max_connections", "--max-connections", "N     most client connections at once (default 4096; 0: no limit)"},
    {"max_message_size", "--max-message-size", "BYTES  largest client message accepted (default and most 48000000)"},
    {"idle_timeout_ms", "--idle-timeout-ms", "MS    close client connections idle this long (default 0: never)"},
    {"client_compression", "--client-compression", "on|off  compress the client link when a driver offers it (default off)"},
    {"sidecars", "--sidecars", "GROUP     check that the sidecars of GROUP run rules that agree (default: off)"},
    {"sidecars_registry", "--sidecars-registry", "DB.COLL  where the sidecars' heartbeats live (default remold.sidecars)"},
    {"config", "--config", "FILE        YAML file with the keys above (flags override it)"},
}};

std::string ExpectedKeys() {
  std::string keys;
  for (const Setting& s : kSettings) {
    if (s.file_key == "config") continue;
    if (!keys.empty()) keys += ", ";
    keys += s.file_key;
  }
  return keys;
}

int ParsePositiveInt(std::string_view text, std::string_view name) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0)
    throw ConfigError(std::string(name) + ": expected a non-negative integer, got '" +
                      std::string(text) + "'");
  return value;
}

// Applies one setting, named by its file key, from its text value.
void Apply(Config& config, std::string_view key, const std::string& value, std::string_view name) {
  std::string error;
  if (key == "listen") {
    std::optional<HostAndPort> listen = ParseHostAndPort(value, error);
    if (!listen) throw ConfigError(std::string(name) + ": " + error + " (expected HOST:PORT)");
    config.listen = *listen;
  } else if (key == "backend") {
    config.backend_uri = value;
  } else if (key == "backend_credentials") {
    config.backend_credentials_file = value;
  } else if (key == "rules") {
    config.rules_dir = value;
  } else if (key == "log_level") {
    if (std::find(kLogLevels.begin(), kLogLevels.end(), value) == kLogLevels.end())
      throw ConfigError(std::string(name) + ": unknown log level '" + value +
                        "' (expected trace, debug, info, warn, error or off)");
    config.log_level = value;
  } else if (key == "threads") {
    config.threads = ParsePositiveInt(value, name);
  } else if (key == "drain_timeout_ms") {
    config.drain_timeout = std::chrono::milliseconds(ParsePositiveInt(value, name));
  } else if (key == "tls_cert") {
    config.tls_cert_file = value;
  } else if (key == "tls_key") {
    config.tls_key_file = value;
  } else if (key == "tls_client_ca") {
    config.tls_client_ca_file = value;
  } else if (key == "metrics_listen") {
    std::optional<HostAndPort> listen = ParseHostAndPort(value, error);
    if (!listen) throw ConfigError(std::string(name) + ": " + error + " (expected HOST:PORT)");
    config.metrics_listen = *listen;
  } else if (key == "log_format") {
    if (value != "text" && value != "json")
      throw ConfigError(std::string(name) + ": unknown log format '" + value + "' (expected text or json)");
    config.log_format = value;
  } else if (key == "slow_op_ms") {
    config.slow_op = std::chrono::milliseconds(ParsePositiveInt(value, name));
  } else if (key == "backend_pool_size") {
    config.backend_pool_size = ParsePositiveInt(value, name);
  } else if (key == "max_connections") {
    config.max_connections = ParsePositiveInt(value, name);
  } else if (key == "max_message_size") {
    int size = ParsePositiveInt(value, name);
    if (size < 1'048'576 || size > 48'000'000)
      throw ConfigError(std::string(name) + ": expected 1048576..48000000 bytes, got " + value);
    config.max_message_size = size;
  } else if (key == "idle_timeout_ms") {
    config.idle_timeout = std::chrono::milliseconds(ParsePositiveInt(value, name));
  } else if (key == "sidecars") {
    if (value.empty()) throw ConfigError(std::string(name) + ": expected a group name");
    config.sidecars_group = value;
  } else if (key == "sidecars_registry") {
    const size_t dot = value.find('.');
    if (dot == std::string::npos || dot == 0 || dot + 1 == value.size() || value.find('$') != std::string::npos)
      throw ConfigError(std::string(name) + ": expected DATABASE.COLLECTION, got '" + value + "'");
    config.sidecars_registry = {value.substr(0, dot), value.substr(dot + 1)};
  } else if (key == "client_compression") {
    if (value != "on" && value != "off")
      throw ConfigError(std::string(name) + ": expected on or off, got '" + value + "'");
    config.client_compression = value == "on";
  }
}

void LoadFile(Config& config, const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    throw ConfigError(path + ": cannot read the file");
  } catch (const YAML::Exception& e) {
    throw ConfigError(path + ":" + std::to_string(e.mark.line + 1) + ": invalid YAML: " + e.msg);
  }
  if (root.IsNull()) return;
  if (!root.IsMap()) throw ConfigError(path + ": expected a mapping of keys to values");
  for (const auto& entry : root) {
    if (!entry.first.IsScalar())
      throw ConfigError(path + ":" + std::to_string(entry.first.Mark().line + 1) +
                        ": a key must be a plain name (expected one of: " + ExpectedKeys() + ")");
    const std::string key = entry.first.as<std::string>();
    const std::string where = path + ":" + std::to_string(entry.first.Mark().line + 1) + ": key '" + key + "'";
    bool known = false;
    for (const Setting& s : kSettings) known = known || (s.file_key == key && key != "config");
    if (!known)
      throw ConfigError(path + ":" + std::to_string(entry.first.Mark().line + 1) +
                        ": unknown key '" + key + "' (expected one of: " + ExpectedKeys() + ")");
    if (!entry.second.IsScalar())
      throw ConfigError(where + ": expected a single value");
    Apply(config, key, entry.second.as<std::string>(), where);
  }
}

void Validate(Config& config) {
  if (config.backend_uri.empty())
    throw ConfigError("backend: required (set --backend or the 'backend' key)");
  std::string error;
  std::optional<BackendOptions> backend = ParseBackendUri(config.backend_uri, error);
  if (!backend) throw ConfigError("backend: " + error);
  config.backend = *backend;
  config.identity = LoadBackendIdentity(config.backend_credentials_file, ProcessEnvironment);
  if (config.identity.enabled) {
    MongocUriPtr own = OwnConnectionUri(config.backend, config.identity, "remold", error);
    if (!own) throw ConfigError("backend_credentials: " + error);
  }
  if (!config.rules_dir.empty() && !std::filesystem::is_directory(config.rules_dir))
    throw ConfigError("rules: '" + config.rules_dir + "' is not a directory");
  if (config.tls_cert_file.empty() != config.tls_key_file.empty())
    throw ConfigError("tls_cert, tls_key: give both (client-side TLS) or neither");
  if (!config.tls_client_ca_file.empty() && config.tls_cert_file.empty())
    throw ConfigError("tls_client_ca: requires tls_cert and tls_key (client certificates need TLS)");
  for (const auto& [key, file] : {std::pair<const char*, const std::string&>{"tls_cert", config.tls_cert_file},
                                  {"tls_key", config.tls_key_file},
                                  {"tls_client_ca", config.tls_client_ca_file}}) {
    if (!file.empty() && !std::filesystem::is_regular_file(file))
      throw ConfigError(std::string(key) + ": '" + file + "' is not a readable file");
  }
}

}  // namespace

Config LoadServeConfig(const std::vector<std::string>& args) {
  Config config;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--config") {
      if (i + 1 >= args.size()) throw ConfigError("--config: expected a file name");
      LoadFile(config, args[i + 1]);
    }
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    const Setting* setting = nullptr;
    for (const Setting& s : kSettings) setting = s.flag == flag ? &s : setting;
    if (!setting) throw ConfigError("unknown flag '" + flag + "' (see remold serve --help)");
    if (i + 1 >= args.size()) throw ConfigError(flag + ": expected a value");
    const std::string& value = args[++i];
    if (setting->file_key != "config") Apply(config, setting->file_key, value, flag);
  }
  Validate(config);
  return config;
}

std::string ServeUsage() {
  std::string usage = "usage: remold serve [flags]\n\nflags:\n";
  for (const Setting& s : kSettings) {
    // help is "ARG   description": the flag and its argument, then the text.
    std::string_view help = s.help;
    std::string_view arg = help.substr(0, help.find(' '));
    std::string_view text = help.substr(arg.size());
    text.remove_prefix(std::min(text.find_first_not_of(' '), text.size()));
    std::string left = "  " + std::string(s.flag) + " " + std::string(arg);
    left.resize(std::max<size_t>(left.size() + 2, 32), ' ');
    usage += left + std::string(text) + "\n";
  }
  return usage;
}

}  // namespace remold
