#include "app/serve.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "app/adoption.h"
#include "app/logging.h"
#include "app/rule_reloader.h"
#include "app/sidecars.h"
#include "app/status_server.h"
#include "config/config.h"
#include "proxy/metrics.h"
#include "proxy/server.h"
#include "ruleset/patterns.h"

namespace remold {
namespace {

constexpr int kOk = 0;  // drained, or --help
constexpr int kCannotListen = 1;
constexpr int kRejected = 2;  // configuration, rules or TLS files
// How long `remold serve` waits for the first counts of the documents
// written before the rules before it listens (app/adoption.h).
constexpr auto kFirstCountsWait = std::chrono::seconds(10);

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
  // Counts the documents written before each rule, now and after each
  // reload that adds or changes rules, and serves each rule as the counts
  // say (app/adoption.h); waits a little for the first counts.
  void AdoptRules();
  // With a `sidecars` group, publishes this remold's heartbeat and checks
  // the others' (app/sidecars.h).
  void JoinSidecars();
  // Binds the client address, announces it, and serves until drained.
  bool ListenAndServe();

 private:
  ServerOptions MakeServerOptions();
  void Announce(const tcp::endpoint& bound) const;
  // What keeps /readyz at 503 on remold's side ("" when nothing does).
  std::string NotReadyReason() const;

  const Config config_;
  // The rules the files say, and the rules in force: those, as the
  // AdoptionMonitor serves them while data written before them remains.
  std::shared_ptr<RuleSetHolder> loaded_ = std::make_shared<RuleSetHolder>();
  std::shared_ptr<RuleSetHolder> rules_ = std::make_shared<RuleSetHolder>();
  std::shared_ptr<AdoptionMonitor> adoption_;
  std::shared_ptr<SidecarRegistry> sidecars_;  // null: no `sidecars` group
  std::unique_ptr<RuleReloader> reloader_;  // null: no rules directory
  std::atomic<bool> draining_{false};
  std::shared_ptr<TlsContexts> tls_;        // null: plain TCP on both sides
  std::shared_ptr<TopologyMonitor> topology_;  // null: directConnection=true
  std::unique_ptr<StatusServer> status_;    // null: no --metrics-listen
  std::string status_address_;
};

bool ServeRun::LoadRules() {
  if (config_.rules_dir.empty()) return true;
  reloader_ = std::make_unique<RuleReloader>(config_.rules_dir, loaded_);
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
    // Every pattern remold knows, zeros included (ruleset/patterns.h).
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

void ServeRun::AdoptRules() {
  adoption_ = std::make_shared<AdoptionMonitor>(config_.backend, config_.identity, rules_);
  adoption_->Load(loaded_->Load());
  GlobalMetrics().AddCollector([adoption = adoption_](prometheus::TextWriter& out) {
    const std::vector<AdoptionMonitor::LayerState> states = adoption->States();
    out.Family("remold_rule_adoption", "gauge",
               "Rules over data that may predate them (their files say no `migrating`), by state: counting, "
               "in_form (served in the rule's form alone), not_in_form (served as while documents written "
               "before the rule remain), uncountable.");
    for (const auto& layer : states)
      out.Sample("remold_rule_adoption", {{"rule", layer.rule}, {"pattern", layer.pattern}, {"state", layer.state}},
                 uint64_t{1});
    out.Family("remold_rule_unconverted_documents", "gauge",
               "What the last count of such a rule found written before it and not in its form (up to 1000000).");
    for (const auto& layer : states)
      out.Sample("remold_rule_unconverted_documents", {{"rule", layer.rule}, {"pattern", layer.pattern}},
                 static_cast<uint64_t>(layer.left));
  });
  if (reloader_) {
    reloader_->SetOnChange([adoption = adoption_.get(), loaded = loaded_](const RuleSet&, const RuleSet&) {
      adoption->Load(loaded->Load());
    });
  }
  // Until a rule's count is in, it serves as if documents written before
  // it remained (both forms, or refusing): a short wait spares the first
  // clients that, where the collections are small.
  if (!adoption_->AwaitCounts(kFirstCountsWait))
    spdlog::info("rules: some counts of the documents written before the rules are still running; until they "
                 "are in, those rules serve as if some remained");
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
  options.pool.max_per_member = static_cast<size_t>(config_.backend_pool_size);
  options.pool.wait_timeout = config_.backend.wait_queue_timeout;
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

void ServeRun::JoinSidecars() {
  if (config_.sidecars_group.empty()) return;
  SidecarRegistry::Options options{config_.backend, config_.identity, config_.sidecars_group,
                                   config_.sidecars_registry,
                                   config_.listen.host + ":" + std::to_string(config_.listen.port)};
  options.others_write = [adoption = adoption_](const auto& writes) { adoption->OthersWrite(writes); };
  sidecars_ = std::make_shared<SidecarRegistry>(std::move(options), rules_);
  GlobalMetrics().AddCollector([sidecars = sidecars_](prometheus::TextWriter& out) {
    out.Family("remold_sidecars_live", "gauge",
               "The other live sidecars of this remold's group (`sidecars`), as their heartbeats say.");
    out.Sample("remold_sidecars_live", {}, static_cast<uint64_t>(sidecars->Live()));
    std::map<std::pair<std::string, std::string>, uint64_t> counts;
    for (const Disagreement& d : sidecars->Current()) ++counts[{d.ns, d.this_reads ? "this" : "other"}];
    out.Family("remold_sidecar_disagreements", "gauge",
               "Live sidecars of the group with which this remold disagrees on a collection: reader=\"this\", it "
               "cannot read what they write; reader=\"other\", they cannot read what it writes.");
    for (const auto& [key, count] : counts)
      out.Sample("remold_sidecar_disagreements", {{"namespace", key.first}, {"reader", key.second}}, count);
  });
}

std::string ServeRun::NotReadyReason() const {
  if (draining_) return "draining: shutting down";
  if (reloader_ && reloader_->reloads() == 0) return "rules not loaded";
  if (sidecars_) {
    if (std::string why = sidecars_->NotReadyReason(); !why.empty()) return why;
  }
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
  run.AdoptRules();
  run.JoinSidecars();
  return run.ListenAndServe() ? kOk : kCannotListen;
}

}  // namespace remold
