// remold: a MongoDB wire-protocol proxy that applies schema design patterns.
//
//   remold serve [flags]   run the proxy (see `remold serve --help`)
//   remold check DIR       validate rule files
//   remold explain ...     dry-run the rewrite of one command
//   remold reconcile ...   recompute computed rules' values, report drift, fix
//   remold --version
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "app/config.h"
#include "app/explain.h"
#include "app/reconcile.h"
#include "app/rule_reloader.h"
#include "proxy/server.h"

namespace {

constexpr const char* kVersion = "0.1.0";

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

void SetUpLogging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("remold");
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(level));
}

remold::tcp::endpoint ResolveListen(const remold::HostAndPort& listen) {
  remold::asio::io_context context;
  remold::tcp::resolver resolver(context);
  auto results = resolver.resolve(listen.host, std::to_string(listen.port),
                                  remold::tcp::resolver::passive);
  return results.begin()->endpoint();
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
  SetUpLogging(config.log_level);

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

  remold::ServerOptions options;
  options.rules = rules;
  if (reloader) options.on_sighup = [&reloader] { reloader->Reload("SIGHUP"); };
  options.backend = config.backend;
  options.worker_threads = config.threads;
  options.drain_timeout = config.drain_timeout;
  try {
    options.listen = ResolveListen(config.listen);
    remold::Server server(options);
    remold::tcp::endpoint bound = server.Bind();
    std::string host = bound.address().is_v6() ? "[" + bound.address().to_string() + "]"
                                               : bound.address().to_string();
    std::printf("remold listening on %s:%u\n", host.c_str(), bound.port());
    std::fflush(stdout);
    spdlog::info("listening on {}:{}, backend {}", host, bound.port(), config.backend_uri);
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
  if (args[0] == "reconcile") return remold::RunReconcile(rest, std::cout, std::cerr, isatty(STDERR_FILENO));
  std::cerr << "remold: unknown command '" << args[0] << "'\n" << kUsage;
  return 2;
}
