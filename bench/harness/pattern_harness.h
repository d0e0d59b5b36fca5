// pattern_harness: everything the pattern benches share, so that a
// pattern's bench is only its scenario: its rule, its data, its operations
// and what it compares (see bench/README.md, "Adding a pattern bench").
//
// Contract:
//   - run_pattern_bench() is a pattern bench's whole main(). It parses the
//     common flags (--direct, --proxy, --keep, --remold-pid, --backend-pid,
//     --print-rule, -h/--help) and hands every other flag to the scenario;
//     connects one admin connection to the backend and one to remold (a
//     fatal error when either does not answer a ping); prints the header
//     (endpoints, the rule, the client library, the scenario's description,
//     the machine and its caveat); runs the scenario; cleans up unless
//     --keep; prints the load average after the run.
//   - --print-rule prints the scenario's rule (YAML) and exits 0:
//     bench/patterns/pattern_run.sh starts remold with it, so a rule is written once,
//     in its scenario.
//   - A scenario's set_option() returns false for a flag it does not know
//     (a usage error then) and reports a bad value with usage_error().
//   - Exit status: 0 when run() returns true (every operation succeeded and
//     every check passed), 1 when it returns false or anything throws
//     ("PROGRAM: fatal: ..." on stderr, no clean-up), 2 on bad arguments.
#pragma once

#include "bench_mongoc.h"
#include "cpu_probe.h"

#include <string>
#include <string_view>
#include <vector>

namespace bench_common {

// Which endpoint an operation goes to: the backend itself or remold.
enum class Via { direct, remold };

class Harness {
 public:
  Harness(const char* program, std::string direct, std::string proxy, CpuProbe cpu);

  const std::string& address(Via via) const { return via == Via::direct ? direct_ : proxy_; }
  // New connections, handshaken, named after the bench in the server's logs.
  ClientPtr connect(Via via) const;
  std::vector<ClientPtr> connect(Via via, int count) const;
  // One connection to each endpoint for set-up, checks and clean-up; used
  // from the main thread only.
  mongoc_client_t* admin(Via via) const {
    return via == Via::direct ? direct_admin_.get() : proxy_admin_.get();
  }
  const CpuProbe& cpu() const { return cpu_; }

 private:
  const char* program_;
  std::string direct_;
  std::string proxy_;
  CpuProbe cpu_;
  ClientPtr direct_admin_;
  ClientPtr proxy_admin_;
};

class PatternScenario {
 public:
  virtual ~PatternScenario() = default;

  // "bucket_bench": the program, in messages and the server's logs.
  virtual const char* program() const = 0;
  // The rule remold must run for this bench, as a rule file (YAML).
  virtual const char* rule() const = 0;
  // The usage lines of the scenario's own options.
  virtual const char* options() const = 0;
  // The scenario's flags that take no value.
  virtual std::vector<std::string_view> switches() const { return {}; }
  virtual bool set_option(const std::string& flag, const std::string& value) = 0;
  // After every flag: checks that the options agree with each other.
  virtual void check_options() {}

  // The header lines after the rule: data, sides, schedule.
  virtual void describe() const = 0;
  // Runs, checks and prints everything; true when every check passed.
  virtual bool run(Harness& harness) = 0;
  // Removes the bench's data (not called with --keep).
  virtual void clean_up(Harness& harness) = 0;
};

int run_pattern_bench(int argc, char** argv, PatternScenario& scenario);

}  // namespace bench_common
