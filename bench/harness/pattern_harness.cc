// The scaffolding of every pattern bench: see pattern_harness.h.
#include "pattern_harness.h"

#include "bench_common.h"

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <utility>

namespace bench_common {

Harness::Harness(const char* program, std::string direct, std::string proxy, CpuProbe cpu)
    : program_(program),
      direct_(std::move(direct)),
      proxy_(std::move(proxy)),
      cpu_(cpu),
      direct_admin_(connect(Via::direct)),
      proxy_admin_(connect(Via::remold)) {}

ClientPtr Harness::connect(Via via) const { return bench_common::connect(address(via), program_); }

std::vector<ClientPtr> Harness::connect(Via via, int count) const {
  std::vector<ClientPtr> clients;
  for (int i = 0; i < count; ++i) clients.push_back(connect(via));
  return clients;
}

namespace {

struct CommonOptions {
  std::string direct;
  std::string proxy;
  bool keep = false;
  int remold_pid = 0;
  int backend_pid = 0;
};

std::string usage_of(const PatternScenario& scenario) {
  return std::string("usage: ") + scenario.program() +
         " --direct HOST:PORT --proxy HOST:PORT [options]\n"
         "  --direct HOST:PORT   the backend, directly (the comparison, set-up, checks)\n"
         "  --proxy HOST:PORT    remold, running the rule --print-rule prints\n" +
         scenario.options() +
         "  --keep               leave the bench's data in place at the end\n"
         "  --remold-pid PID     report remold's CPU time (local runs)\n"
         "  --backend-pid PID    report the backend's CPU time (local runs)\n"
         "  --print-rule         print the rule remold must run (YAML) and exit\n";
}

CommonOptions parse_options(int argc, char** argv, PatternScenario& scenario) {
  static const std::string usage = usage_of(scenario);
  set_usage(scenario.program(), usage.c_str());
  CommonOptions common;
  bool print_rule = false;
  std::vector<std::string_view> switches = scenario.switches();
  switches.insert(switches.end(), {"--keep", "--print-rule"});
  parse_flags(argc, argv, switches, [&](const std::string& flag, const std::string& value) {
    if (flag == "--keep") common.keep = true;
    else if (flag == "--print-rule") print_rule = true;
    else if (flag == "--direct") check_endpoint(flag, common.direct = value);
    else if (flag == "--proxy") check_endpoint(flag, common.proxy = value);
    else if (flag == "--remold-pid") common.remold_pid = static_cast<int>(parse_int(flag, value, 1, 1 << 30));
    else if (flag == "--backend-pid") common.backend_pid = static_cast<int>(parse_int(flag, value, 1, 1 << 30));
    else if (!scenario.set_option(flag, value)) usage_error("unknown argument '" + flag + "'");
  });
  if (print_rule) {
    std::fputs(scenario.rule(), stdout);
    std::exit(0);
  }
  if (common.direct.empty() || common.proxy.empty()) usage_error("--direct and --proxy are required");
  scenario.check_options();
  return common;
}

void print_header(const PatternScenario& scenario, const Harness& harness) {
  std::printf("%s: direct %s (backend), remold %s\n", scenario.program(),
              harness.address(Via::direct).c_str(), harness.address(Via::remold).c_str());
  std::printf("  remold rule:\n");
  std::istringstream rule(scenario.rule());
  for (std::string line; std::getline(rule, line);) std::printf("    | %s\n", line.c_str());
  std::printf("  client: mongo-c-driver %s\n", mongoc_get_version());
  scenario.describe();
  print_machine("  CAVEAT: the bench client, remold and the backend share these cores (on 2 cores\n"
                "  every cycle remold spends is taken from the backend or the client), and other\n"
                "  load on the machine moves every number: compare rows of the same run only.\n\n");
  std::fflush(stdout);
}

}  // namespace

int run_pattern_bench(int argc, char** argv, PatternScenario& scenario) {
  const CommonOptions common = parse_options(argc, argv, scenario);
  return run_main(scenario.program(), [&] {
    Harness harness(scenario.program(), common.direct, common.proxy,
                    CpuProbe(common.remold_pid, common.backend_pid));
    print_header(scenario, harness);
    const bool ok = scenario.run(harness);
    if (!common.keep) scenario.clean_up(harness);
    std::printf("\nload average after the run: %.2f\n", load_average());
    if (!ok) std::printf("some checks failed (see above)\n");
    std::fflush(stdout);
    return ok ? 0 : 1;
  });
}

}  // namespace bench_common
