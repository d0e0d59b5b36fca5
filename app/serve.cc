#include "app/serve.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "app/config.h"
#include "app/logging.h"
#include "app/rule_reloader.h"
#include "app/status_server.h"
#include "proxy/metrics.h"
#include "proxy/server.h"

namespace remold {
namespace {

tcp::endpoint ResolveListen(const HostAndPort& listen) {
  asio::io_context context;
  tcp::resolver resolver(context);
  auto results = resolver.resolve(listen.host, std::to_string(listen.port),
                                  tcp::resolver::passive);
  return results.begin()->endpoint();
}

std::string HostPort(const tcp::endpoint& endpoint) {
  std::string host = endpoint.address().is_v6() ? "[" + endpoint.address().to_string() + "]"
                                                : endpoint.address().to_string();
  return host + ":" + std::to_string(endpoint.port());
}

// Rule reloads and the rules in force, for /metrics.
void RegisterRuleMetrics(Metrics& metrics, std::shared_ptr<RuleSetHolder> rules,
                         const RuleReloader* reloader) {
  // Every rule in force has its series from the start, zeros included.
  metrics.AddRefresher([&metrics, rules] {
    for (const Rule& rule : rules->Load()->rules()) metrics.ForRule(rule.name);
  });
  metrics.AddCollector([rules, reloader](prometheus::TextWriter& out) {
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

}  // namespace

int RunServe(const std::vector<std::string>& args) {
  for (const auto& arg : args) {
    if (arg == "--help" || arg == "-h") {
      std::cout << ServeUsage();
      return 0;
    }
  }
  Config config;
  try {
    config = LoadServeConfig(args);
  } catch (const ConfigError& e) {
    std::cerr << "remold: config error: " << e.what() << "\n";
    return 2;
  }
  SetUpLogging(config.log_level, config.log_format);

  auto rules = std::make_shared<RuleSetHolder>();
  std::unique_ptr<RuleReloader> reloader;
  if (!config.rules_dir.empty()) {
    reloader = std::make_unique<RuleReloader>(config.rules_dir, rules);
    std::vector<std::string> errors = reloader->Reload("start");
    if (!errors.empty()) {
      for (const auto& error : errors) std::cerr << error << "\n";
      std::cerr << "remold: refusing to start: " << errors.size() << " error(s) in the rules\n";
      return 2;
    }
    reloader->Watch(std::chrono::seconds(1));
  }

  Metrics& metrics = GlobalMetrics();
  RegisterRuleMetrics(metrics, rules, reloader.get());
  std::unique_ptr<StatusServer> status;  // --metrics-listen
  std::string status_address;
  auto draining = std::make_shared<std::atomic<bool>>(false);
  if (config.metrics_listen) {
    const HostAndPort& at = *config.metrics_listen;
    try {
      status = std::make_unique<StatusServer>(
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

  ServerOptions options;
  options.rules = rules;
  // Limits and TLS (proxy/connection_policy.h). The certificates are loaded
  // now (an error stops remold) and again on SIGHUP (an error keeps them).
  options.policy.limits.max_connections = config.max_connections;
  options.policy.limits.max_message_size = config.max_message_size;
  options.policy.limits.idle_timeout = config.idle_timeout;
  RaiseFileLimit(config.max_connections);
  if (!config.tls_cert_file.empty() || config.backend.tls.enabled) {
    options.policy.tls = std::make_shared<TlsContexts>(
        ClientTlsFiles{config.tls_cert_file, config.tls_key_file, config.tls_client_ca_file},
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
    Server server(options);
    tcp::endpoint bound = server.Bind();
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

}  // namespace remold
