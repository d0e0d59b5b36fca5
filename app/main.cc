// remold: a MongoDB wire-protocol proxy that applies schema design patterns.
//
//   remold serve [flags]   run the proxy (see `remold serve --help`)
//   remold check DIR       validate rule files
//   remold explain ...     dry-run the rewrite of one command
//   remold reconcile ...   recompute computed rules' values, report drift, fix
//   remold --version
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "app/config.h"
#include "app/explain.h"
#include "app/logging.h"
#include "app/rule_reloader.h"
#include "app/status_server.h"
#include "proxy/metrics.h"
#include "proxy/server.h"

namespace {

constexpr const char* kVersion = "0.1.0";

// `remold reconcile ARGS`: replaces this process with remold-reconcile
// ARGS, found next to this executable.
int RunReconcileProgram(const char* argv0, const std::vector<std::string>& args) {
  std::string self(4096, '\0');
  ssize_t n = readlink("/proc/self/exe", self.data(), self.size() - 1);
  self.resize(n > 0 ? static_cast<size_t>(n) : 0);
  if (self.empty()) self = argv0;
  std::string program = self.substr(0, self.rfind('/') + 1) + "remold-reconcile";
  std::vector<char*> argv;
  argv.push_back(program.data());
  std::vector<std::string> copies(args);
  for (std::string& arg : copies) argv.push_back(arg.data());
  argv.push_back(nullptr);
  execv(program.c_str(), argv.data());
  std::cerr << "remold: cannot run " << program << ": " << std::strerror(errno)
            << " (remold-reconcile is installed next to remold)\n";
  return 2;
}

constexpr const char* kUsage =
    "remold: a MongoDB wire-protocol proxy that applies schema design patterns\n"
    "\n"
    "usage:\n"
    "  remold serve [flags]   run the proxy; `remold serve --help` lists the flags\n"
    "  remold check DIR       validate a rules directory (exit 1 on any error)\n"
    "  remold explain --rules DIR [--db DB] '<command as Extended JSON>'\n"
    "                         print the backend commands remold would send (dry run)\n"
    "  remold reconcile --config FILE [--rule NAME] [--fix]\n"
    "                         recompute the computed rules' values from the source data,\n"
    "                         report drift (exit 1), repair it with --fix\n"
    "  remold --version       print the version\n";

remold::tcp::endpoint ResolveListen(const remold::HostAndPort& listen) {
  remold::asio::io_context context;
  remold::tcp::resolver resolver(context);
  auto results = resolver.resolve(listen.host, std::to_string(listen.port),
                                  remold::tcp::resolver::passive);
  return results.begin()->endpoint();
}

std::string HostPort(const remold::tcp::endpoint& endpoint) {
  std::string host = endpoint.address().is_v6() ? "[" + endpoint.address().to_string() + "]"
                                                : endpoint.address().to_string();
  return host + ":" + std::to_string(endpoint.port());
}

// Rule reloads and the rules in force, for /metrics.
void RegisterRuleMetrics(remold::Metrics& metrics, std::shared_ptr<remold::RuleSetHolder> rules,
                         const remold::RuleReloader* reloader) {
  // Every rule in force has its series from the start, zeros included.
  metrics.AddRefresher([&metrics, rules] {
    for (const remold::Rule& rule : rules->Load()->rules()) metrics.ForRule(rule.name);
  });
  metrics.AddCollector([rules, reloader](remold::prometheus::TextWriter& out) {
    out.Family("remold_rule_reloads_total", "counter",
               "Loads of the rules directory (at start, on SIGHUP, on change), by result.");
    out.Sample("remold_rule_reloads_total", {{"result", "success"}},
               reloader ? reloader->reloads() : uint64_t{0});
    out.Sample("remold_rule_reloads_total", {{"result", "failure"}},
               reloader ? reloader->failures() : uint64_t{0});
    out.Family("remold_rules", "gauge", "Rules in force.");
    out.Sample("remold_rules", {}, static_cast<uint64_t>(rules->Load()->rules().size()));
  });
}

int Serve(const std::vector<std::string>& args) {
  for (const auto& arg : args) {
    if (arg == "--help" || arg == "-h") {
      std::cout << remold::ServeUsage();
      return 0;
    }
  }
  remold::Config config;
  try {
    config = remold::LoadServeConfig(args);
  } catch (const remold::ConfigError& e) {
    std::cerr << "remold: config error: " << e.what() << "\n";
    return 2;
  }
  remold::SetUpLogging(config.log_level, config.log_format);

  auto rules = std::make_shared<remold::RuleSetHolder>();
  std::unique_ptr<remold::RuleReloader> reloader;
  if (!config.rules_dir.empty()) {
    reloader = std::make_unique<remold::RuleReloader>(config.rules_dir, rules);
    std::vector<std::string> errors = reloader->Reload("start");
    if (!errors.empty()) {
      for (const auto& error : errors) std::cerr << error << "\n";
      std::cerr << "remold: refusing to start: " << errors.size() << " error(s) in the rules\n";
      return 2;
    }
    reloader->Watch(std::chrono::seconds(1));
  }

  remold::Metrics& metrics = remold::GlobalMetrics();
  RegisterRuleMetrics(metrics, rules, reloader.get());
  std::unique_ptr<remold::StatusServer> status;  // --metrics-listen
  std::string status_address;
  auto draining = std::make_shared<std::atomic<bool>>(false);
  if (config.metrics_listen) {
    const remold::HostAndPort& at = *config.metrics_listen;
    try {
      status = std::make_unique<remold::StatusServer>(
          metrics, config.backend, [&reloader, draining]() -> std::string {
            if (*draining) return "draining: shutting down";
            return reloader && reloader->reloads() == 0 ? "rules not loaded" : "";
          });
      status_address = HostPort(status->Bind(ResolveListen(at)));
    } catch (const boost::system::system_error& e) {
      std::cerr << "remold: metrics listen " << at.host << ":" << at.port << ": "
                << e.code().message() << "\n";
      return 1;
    }
  }

  remold::ServerOptions options;
  options.rules = rules;
  // Limits and TLS (proxy/connection_policy.h). The certificates are loaded
  // now (an error stops remold) and again on SIGHUP (an error keeps them).
  options.policy.limits.max_connections = config.max_connections;
  options.policy.limits.max_message_size = config.max_message_size;
  options.policy.limits.idle_timeout = config.idle_timeout;
  remold::RaiseFileLimit(config.max_connections);
  if (!config.tls_cert_file.empty() || config.backend.tls.enabled) {
    options.policy.tls = std::make_shared<remold::TlsContexts>(
        remold::ClientTlsFiles{config.tls_cert_file, config.tls_key_file, config.tls_client_ca_file},
        config.backend.tls);
    std::vector<std::string> errors = options.policy.tls->Load();
    for (const auto& error : errors) std::cerr << "remold: config error: " << error << "\n";
    if (!errors.empty()) return 2;
  }
  options.on_drain = [draining] { *draining = true; };
  options.on_sighup = [&reloader, tls = options.policy.tls] {
    if (reloader) reloader->Reload("SIGHUP");
    if (tls) tls->Reload();
  };
  options.backend = config.backend;
  options.worker_threads = config.threads;
  options.drain_timeout = config.drain_timeout;
  options.slow_operation = config.slow_op;
  try {
    options.listen = ResolveListen(config.listen);
    remold::Server server(options);
    remold::tcp::endpoint bound = server.Bind();
    std::string host = bound.address().is_v6() ? "[" + bound.address().to_string() + "]"
                                               : bound.address().to_string();
    std::printf("remold listening on %s:%u\n", host.c_str(), bound.port());
    std::fflush(stdout);
    spdlog::info("listening on {}:{}, backend {}", host, bound.port(), config.backend_uri);
    if (status) {
      std::printf("remold metrics listening on %s\n", status_address.c_str());
      std::fflush(stdout);
      spdlog::info("metrics on http://{}/metrics (/healthz, /readyz)", status_address);
      status->Start();
    }
    server.Run();
  } catch (const boost::system::system_error& e) {
    std::cerr << "remold: listen " << config.listen.host << ":" << config.listen.port << ": "
              << e.code().message() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::cout << kUsage;
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "--version") {
    std::cout << "remold " << kVersion << "\n";
    return 0;
  }
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (args[0] == "serve") return Serve(rest);
  if (args[0] == "check") return remold::RunCheck(rest, std::cout, std::cerr);
  if (args[0] == "explain") return remold::RunExplain(rest, std::cout, std::cerr);
  if (args[0] == "reconcile") return RunReconcileProgram(argv[0], rest);
  std::cerr << "remold: unknown command '" << args[0] << "'\n" << kUsage;
  return 2;
}
