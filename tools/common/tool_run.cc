#include "tools/common/tool_run.h"

#include <ostream>

#include "ruleset/loader.h"

namespace remold {

ToolSetup LoadToolSetup(const std::vector<std::string>& config_args, std::ostream& err) {
  ToolSetup setup;
  setup.config = LoadServeConfig(config_args);
  if (setup.config.rules_dir.empty()) throw UsageError("rules: required (set --rules or the 'rules' key)");
  RuleLoadResult loaded = LoadRuleDirectory(setup.config.rules_dir);
  for (const std::string& error : loaded.errors) err << error << "\n";
  if (!loaded.errors.empty()) throw UsageError(std::to_string(loaded.errors.size()) + " error(s) in the rules");
  setup.rules = loaded.rules;
  return setup;
}

std::unique_ptr<BackendClient> ConnectBackend(const Config& config, std::string_view app_name) {
  auto backend = std::make_unique<BackendClient>(config.backend, config.identity, app_name);
  try {
    backend->Ping();
  } catch (const BackendError& e) {
    throw BackendError("cannot reach the backend " + config.backend_uri + ": " + e.what());
  }
  return backend;
}

int RunReportingErrors(const std::string& prefix, std::ostream& err, const std::function<int()>& body) {
  try {
    return body();
  } catch (const UsageError& e) {
    err << prefix << e.what() << "\n";
  } catch (const ConfigError& e) {
    err << prefix << "config error: " << e.what() << "\n";
  } catch (const BackendError& e) {
    err << prefix << e.what() << "\n";
  }
  return 2;
}

}  // namespace remold
