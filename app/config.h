// remold's configuration: a YAML file and command-line flags, flags winning.
//
// Every key is validated when loaded; a mistake throws ConfigError with one
// line that names the bad key or flag and what was expected.
#pragma once

#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include "proxy/backend_uri.h"

namespace remold {

class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Config {
  HostAndPort listen{"127.0.0.1", 27018};
  std::string backend_uri;          // required
  BackendOptions backend;           // parsed from backend_uri
  std::string rules_dir;            // optional
  std::string log_level = "info";
  int threads = 0;                  // 0: one per hardware thread
  std::chrono::milliseconds drain_timeout{30'000};
};

// Parses `serve` arguments (argv after "serve"). Reads --config FILE first,
// then applies the other flags over it, then validates the result.
Config LoadServeConfig(const std::vector<std::string>& args);

// The flags of `remold serve`, for --help.
std::string ServeUsage();

}  // namespace remold
