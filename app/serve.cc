#include "app/serve.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "app/config.h"
#include "app/logging.h"
#include "app/rule_reloader.h"
#include "app/status_server.h"
#include "app/unconverted_data.h"
#include "tools/common/backend_client.h"
#include "patterns/patterns.h"
#include "proxy/metrics.h"
#include "proxy/server.h"

namespace remold {
namespace {

constexpr int kOk = 0;  // drained, or --help
constexpr int kCannotListen = 1;
constexpr int kRejected = 2;  // configuration, rules or TLS files

tcp::endpoint ResolveListen(const HostAndPort& listen) {
  asio::io_context context;
  Resolver resolver(context);
  auto results = resolver.resolve(listen.host, std::to_string(listen.port), tcp::resolver::passive);
  return results.begin()->endpoint();
}

std::string HostPort(const tcp::endpoint& endpoint) {
  std::string host = endpoint.address().is_v6() ? "[" + endpoint.address().to_string() + "]"
                                                : endpoint.address().to_string();
  return host + ":" + std::to_string(endpoint.port());
}

bool AsksForHelp(const std::vector<std::string>& args) {
  return std::any_of(args.begin(), args.end(),
                     [](const std::string& arg) { return arg == "--help" || arg == "-h"; });
}

// --config and the flags; nullopt once the error is printed.
std::optional<Config> ReadConfig(const std::vector<std::string>& args) {
  try {
    return LoadServeConfig(args);
  } catch (const ConfigError& e) {
    std::cerr << "remold: config error: " << e.what() << "\n";
    return std::nullopt;
  }
}

// Counts, on a thread of its own, the documents written before each rule
// of `probes` that are not in its form, and warns of them
// (app/unconverted_data.h).
void CountUnconverted(std::vector<UnconvertedProbe> probes, const Config& config);

// One run of `remold serve`, set up in the order RunServe calls the steps.
// A step that fails prints why and returns false. The status endpoint and
// the server call back into this object, which outlives both.
class ServeRun {
 public:
  explicit ServeRun(Config config) : config_(std::move(config)) {}
  ServeRun(const ServeRun&) = delete;
  ServeRun& operator=(const ServeRun&) = delete;

  // Loads the rules directory, if one is configured, and watches it.
  bool LoadRules();
  // Rule reloads and the rules in force, for /metrics.
  void RegisterRuleMetrics();
  // With --metrics-listen, binds /metrics, /healthz and /readyz; they
  // answer once the proxy listens.
  bool BindStatusEndpoint();
  // Loads the certificates when either side uses TLS (SIGHUP reloads them).
  bool LoadTls();
  // Starts monitoring the backend (not with directConnection=true), and
  // its metrics.
  bool StartTopologyMonitor();
  // Warns of the documents written before each rule, now and after each
  // reload that adds or changes rules.
  void WarnOfUnconvertedData();
  // Binds the client address, announces it, and serves until drained.
  bool ListenAndServe();

 private:
  ServerOptions MakeServerOptions();
  void Announce(const tcp::endpoint& bound) const;
  // What keeps /readyz at 503 on remold's side ("" when nothing does).
  std::string NotReadyReason() const;

  const Config config_;
  std::shared_ptr<RuleSetHolder> rules_ = std::make_shared<RuleSetHolder>();
  std::unique_ptr<RuleReloader> reloader_;  // null: no rules directory
  std::atomic<bool> draining_{false};
  std::shared_ptr<TlsContexts> tls_;        // null: plain TCP on both sides
  std::shared_ptr<TopologyMonitor> topology_;  // null: directConnection=true
  std::unique_ptr<StatusServer> status_;    // null: no --metrics-listen
  std::string status_address_;
};

bool ServeRun::LoadRules() {
  if (config_.rules_dir.empty()) return true;
  reloader_ = std::make_unique<RuleReloader>(config_.rules_dir, rules_);
  std::vector<std::string> errors = reloader_->Reload("start");
  if (!errors.empty()) {
    for (const auto& error : errors) std::cerr << error << "\n";
    std::cerr << "remold: refusing to start: " << errors.size() << " error(s) in the rules\n";
    return false;
  }
  reloader_->Watch(std::chrono::seconds(1));
  return true;
}

void ServeRun::RegisterRuleMetrics() {
  Metrics& metrics = GlobalMetrics();
  // Every rule in force has its series from the start, zeros included.
  metrics.AddRefresher([&metrics, rules = rules_] {
    for (const Rule& rule : rules->Load()->rules()) metrics.ForRule(rule.name);
  });
  metrics.AddCollector([rules = rules_, reloader = reloader_.get()](prometheus::TextWriter& out) {
    out.Family("remold_rule_reloads_total", "counter",
               "Loads of the rules directory (at start, on SIGHUP, on change), by result.");
    out.Sample("remold_rule_reloads_total", {{"result", "success"}},
               reloader ? reloader->reloads() : uint64_t{0});
    out.Sample("remold_rule_reloads_total", {{"result", "failure"}},
               reloader ? reloader->failures() : uint64_t{0});
    const std::shared_ptr<const RuleSet> in_force = rules->Load();
    out.Family("remold_rules", "gauge", "Rules in force.");
    out.Sample("remold_rules", {}, static_cast<uint64_t>(in_force->rules().size()));
    // Every pattern remold knows, zeros included (patterns/patterns.h).
    out.Family("remold_rules_by_pattern", "gauge", "Rules in force, by pattern (a stack counts under each of its patterns).");
    ForEachPatternType([&]<typename R>() {
      uint64_t count = 0;
      for (const Rule& rule : in_force->rules()) count += rule.Has(R::kName);
      out.Sample("remold_rules_by_pattern", {{"pattern", R::kName}}, count);
    });
  });
}

bool ServeRun::BindStatusEndpoint() {
  if (!config_.metrics_listen) return true;
  const HostAndPort& at = *config_.metrics_listen;
  try {
    status_ = std::make_unique<StatusServer>(GlobalMetrics(), config_.backend, tls_,
                                             [this] { return NotReadyReason(); });
    status_address_ = HostPort(status_->Bind(ResolveListen(at)));
  } catch (const boost::system::system_error& e) {
    std::cerr << "remold: metrics listen " << at.host << ":" << at.port << ": " << e.code().message() << "\n";
    return false;
  }
  return true;
}

bool ServeRun::LoadTls() {
  if (config_.tls_cert_file.empty() && !config_.backend.tls.enabled) return true;
  tls_ = std::make_shared<TlsContexts>(
      ClientTlsFiles{config_.tls_cert_file, config_.tls_key_file, config_.tls_client_ca_file},
      config_.backend.tls);
  std::vector<std::string> errors = tls_->Load();
  for (const auto& error : errors) std::cerr << "remold: config error: " << error << "\n";
  return errors.empty();
}

bool ServeRun::StartTopologyMonitor() {
  if (config_.backend.direct_connection) return true;
  topology_ = std::make_shared<TopologyMonitor>(config_.backend);
  std::string error;
  if (!topology_->Start(error)) {
    std::cerr << "remold: config error: backend: " << error << "\n";
    return false;
  }
  GlobalMetrics().AddCollector([topology = topology_](prometheus::TextWriter& out) {
    const std::shared_ptr<const TopologyView> view = topology->View();
    out.Family("remold_backend_topology", "gauge",
               "The backend's topology type as the monitor sees it (1 for the current type).");
    out.Sample("remold_backend_topology", {{"type", TopologyKindName(view->kind)}}, uint64_t{1});
    out.Family("remold_backend_members", "gauge",
               "The backend's servers as the monitor sees them: 1 for each member's current state.");
    for (const Member& member : view->members)
      out.Sample("remold_backend_members", {{"address", member.address}, {"state", MemberKindName(member.kind)}},
                 uint64_t{1});
    out.Family("remold_backend_no_primary_seconds", "gauge",
               "How long the backend replica set has been without a primary (0 while it has one).");
    const auto since = topology->no_primary_since();
    out.Sample("remold_backend_no_primary_seconds", {},
               since ? std::chrono::duration<double>(std::chrono::steady_clock::now() - *since).count() : 0.0);
    out.Family("remold_backend_primary_changes_total", "counter",
               "Times the backend's primary moved to another member.");
    out.Sample("remold_backend_primary_changes_total", {}, topology->primary_changes());
  });
  return true;
}

void ServeRun::WarnOfUnconvertedData() {
  CountUnconverted(UnconvertedProbes(*rules_->Load()), config_);
  if (reloader_) {
    reloader_->SetOnChange([config = config_](const RuleSet& before, const RuleSet& after) {
      CountUnconverted(UnconvertedProbes(after, &before), config);
    });
  }
}

void CountUnconverted(std::vector<UnconvertedProbe> probes, const Config& config) {
  if (probes.empty()) return;
  // Detached: the counts wait for the backend, on a connection of remold's
  // own (as its own identity), never on a client's.
  std::thread([probes = std::move(probes), backend = config.backend, identity = config.identity] {
    try {
      BackendClient client(backend, identity, backend.app_name.empty() ? "remold" : backend.app_name);
      for (const UnconvertedProbe& probe : probes) {
        try {
          const int64_t count = client.CountDocuments(probe.logical, probe.filter.get(), kUnconvertedCountLimit);
          if (count > 0) spdlog::warn("rules: {}", DescribeUnconverted(probe, count));
        } catch (const BackendError& e) {
          spdlog::warn("rules: could not count the documents of {} written before rule '{}': {}",
                       probe.logical.full(), probe.rule, e.what());
        }
      }
    } catch (const BackendError& e) {
      spdlog::warn("rules: could not count the documents written before the rules: {}", e.what());
    }
  }).detach();
}

bool ServeRun::ListenAndServe() {
  RaiseFileLimit(config_.max_connections);
  try {
    Server server(MakeServerOptions());
    Announce(server.Bind());
    if (status_) status_->Start();
    server.Run();
  } catch (const boost::system::system_error& e) {
    std::cerr << "remold: listen " << config_.listen.host << ":" << config_.listen.port << ": "
              << e.code().message() << "\n";
    return false;
  }
  return true;
}

ServerOptions ServeRun::MakeServerOptions() {
  ServerOptions options;
  options.listen = ResolveListen(config_.listen);
  options.backend = config_.backend;
  options.rules = rules_;
  options.worker_threads = config_.threads;
  options.drain_timeout = config_.drain_timeout;
  options.slow_operation = config_.slow_op;
  options.client_compression = config_.client_compression;
  options.topology = topology_;
  // Limits and TLS: proxy/connection_policy.h.
  options.policy.limits.max_connections = config_.max_connections;
  options.policy.limits.max_message_size = config_.max_message_size;
  options.policy.limits.idle_timeout = config_.idle_timeout;
  options.policy.tls = tls_;
  options.on_drain = [this] { draining_ = true; };
  options.on_sighup = [this] {
    if (reloader_) reloader_->Reload("SIGHUP");
    if (tls_) tls_->Reload();
  };
  return options;
}

// The addresses on stdout, for whoever started remold (and in the log).
void ServeRun::Announce(const tcp::endpoint& bound) const {
  std::string address = HostPort(bound);
  std::printf("remold listening on %s\n", address.c_str());
  std::fflush(stdout);
  spdlog::info("listening on {}, backend {}", address, config_.backend_uri);
  if (!status_) return;
  std::printf("remold metrics listening on %s\n", status_address_.c_str());
  std::fflush(stdout);
  spdlog::info("metrics on http://{}/metrics (/healthz, /readyz)", status_address_);
}

std::string ServeRun::NotReadyReason() const {
  if (draining_) return "draining: shutting down";
  if (reloader_ && reloader_->reloads() == 0) return "rules not loaded";
  if (topology_) {
    if (const auto since = topology_->no_primary_since()) {
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - *since).count();
      char text[32];
      std::snprintf(text, sizeof text, "%.1f", seconds);
      return "backend replica set has no primary for " + std::string(text) + " s";
    }
  }
  return "";
}

}  // namespace

int RunServe(const std::vector<std::string>& args) {
  if (AsksForHelp(args)) {
    std::cout << ServeUsage();
    return kOk;
  }
  std::optional<Config> config = ReadConfig(args);
  if (!config) return kRejected;
  SetUpLogging(config->log_level, config->log_format);

  ServeRun run(*std::move(config));
  if (!run.LoadRules()) return kRejected;
  run.RegisterRuleMetrics();
  if (!run.LoadTls()) return kRejected;
  if (!run.BindStatusEndpoint()) return kCannotListen;  // its probe uses the TLS contexts
  if (!run.StartTopologyMonitor()) return kRejected;
  run.WarnOfUnconvertedData();
  return run.ListenAndServe() ? kOk : kCannotListen;
}

}  // namespace remold
