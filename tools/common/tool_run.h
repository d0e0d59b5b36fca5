// What the offline tools share around their own work: the mistakes of
// their command lines, the configuration and rules they read (as `remold
// serve` does), the backend they connect to, and exit status 2 with one
// line on stderr for every error.
#pragma once

#include <functional>
#include <iosfwd>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "ruleset/rule_set.h"
#include "tools/common/backend_client.h"

namespace remold {

// A mistake of the command line, or a rule the tool cannot work on.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ToolSetup {
  Config config;
  std::shared_ptr<const RuleSet> rules;
};

// The configuration from --config/--backend/--rules, and its rules. Throws
// UsageError (no rules directory, or errors in it: each printed to `err`)
// or ConfigError.
ToolSetup LoadToolSetup(const std::vector<std::string>& config_args, std::ostream& err);

// A client of the configured backend that answered a ping; throws
// BackendError "cannot reach the backend <uri>: ...".
std::unique_ptr<BackendClient> ConnectBackend(const Config& config, std::string_view app_name);

// Runs `body`; a UsageError, ConfigError or BackendError becomes one line
// "<prefix><message>" on `err` and exit status 2.
int RunReportingErrors(const std::string& prefix, std::ostream& err, const std::function<int()>& body);

}  // namespace remold
