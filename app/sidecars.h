// Sidecars that must agree. remold runs as one sidecar per application
// instance, and a rule change reaches them at different times; two
// sidecars whose rules store a collection differently answer from each
// other's documents wrongly and silently. With `sidecars: GROUP` in the
// configuration, each remold of the group publishes a heartbeat in the
// backend (the registry, `remold.sidecars` by default), every 2 seconds
// and within 100 ms of a change of the rules in force, with how its rules store each collection they concern, as they serve now
// (rules/namespace_forms.h): the form it writes, and the forms it reads.
// It reads the others' heartbeats, and for every collection that any live
// sidecar of the group rules, it checks that it reads what each of them
// writes, and that each reads what it writes (a collection it does not
// rule: it writes "plain", and reads what is stored as written).
//
// A disagreement is logged as an error when it starts (and at info when it
// ends), counted in the metrics, and a sidecar that cannot read what
// another writes answers /readyz with 503 and the reason, so that traffic
// leaves the sidecar whose answers would be wrong. A sidecar is live while
// its heartbeat is younger than 10 seconds by the backend's clock; one that
// stops cleanly removes its heartbeat, and the registry forgets heartbeats
// older than an hour.
//
// The work runs on a thread of its own, on remold's own connection (its
// identity needs readWrite on the registry's database).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "proxy/wire/backend_identity.h"
#include "proxy/wire/backend_uri.h"
#include "rules/namespace_forms.h"
#include "ruleset/rule_set.h"

namespace remold {

class BackendClient;

// One sidecar as its heartbeat shows it.
struct SidecarForms {
  std::string id;
  std::string description;  // "host:listen (pid N)"
  std::vector<NamespaceForms> forms;
};

// One collection on which two sidecars disagree: `reader` cannot read what
// `writer` writes there.
struct Disagreement {
  std::string ns;
  std::string reader;       // the sidecar's description ("this remold" for this one)
  std::string writer;
  std::string writes;       // the writer's form
  std::vector<std::string> reads;  // the reader's forms
  bool this_reads = false;  // this remold is the reader

  bool operator==(const Disagreement&) const = default;
};

// Every disagreement between `self` and `others` (pure).
std::vector<Disagreement> Disagreements(const SidecarForms& self, const std::vector<SidecarForms>& others);

// Every collection the rules in force concern, with its forms.
std::vector<NamespaceForms> FormsOf(const RuleSet& rules);

class SidecarRegistry {
 public:
  struct Options {
    BackendOptions backend;
    BackendIdentity identity;
    std::string group;
    Namespace registry{"remold", "sidecars"};
    std::string listen;  // this remold's client address, for the others' messages
    std::chrono::milliseconds interval{2000};
    std::chrono::milliseconds live{10000};
    // After each heartbeat, with what the other live sidecars write to the
    // collections this remold's rules concern: for each collection, each
    // form and one sidecar that writes it (AdoptionMonitor::OthersWrite).
    std::function<void(const std::map<std::string, std::map<std::string, std::string>>&)> others_write;
  };

  SidecarRegistry(Options options, std::shared_ptr<RuleSetHolder> serving);
  // Removes this remold's heartbeat.
  ~SidecarRegistry();
  SidecarRegistry(const SidecarRegistry&) = delete;
  SidecarRegistry& operator=(const SidecarRegistry&) = delete;

  // Why /readyz says 503 on this side ("" when this remold reads what
  // every live sidecar of the group writes).
  std::string NotReadyReason() const;
  // For the metrics.
  std::vector<Disagreement> Current() const;
  size_t Live() const;

 private:
  void Run();
  void WaitForNextBeat(std::unique_lock<std::mutex>& lock, const std::shared_ptr<const RuleSet>& published);
  void Beat(BackendClient& client);
  void Report(std::vector<Disagreement> now, size_t live);

  const Options options_;
  const std::shared_ptr<RuleSetHolder> serving_;
  const std::string id_;
  const std::string description_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::vector<Disagreement> current_;
  size_t live_ = 0;
  bool failing_ = false;  // the last heartbeat failed (warned once per streak)
  int64_t beats_ = 0;
  std::thread thread_;
};

}  // namespace remold
