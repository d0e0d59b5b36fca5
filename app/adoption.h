// Safe adoption of rules over existing data (patterns/adoption.h): the
// rules the files say are not put in force as they are. A rule layer whose
// adoption is automatic (the file says no `migrating`) serves as its
// pattern's WhileUnconverted says, both forms or refusing what would be
// wrong, until remold has counted the documents written before it and
// found none left; then it serves its own form alone.
//
// The counts (app/unconverted_data.h) run on a thread of the monitor's own,
// on remold's own connection (its identity), never on a client's:
//  - at start (AwaitCounts lets `remold serve` wait for them, up to a
//    deadline, before it listens), and for each layer a reload adds or
//    changes;
//  - again while a layer has documents left: as soon as its migration's
//    checkpoint (<db>.remold_migrations, {_id: <rule>}) changes, and every
//    few minutes besides; after a count that failed, a few seconds later.
// A layer's first count above zero, and its change to its own form, are
// logged; so is a count that fails. The other probes (a rule that says
// `migrating`, or `migrating: false`, a versioned rule) are counted once
// per load and warned of when they find documents, as before.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "app/unconverted_data.h"
#include "proxy/wire/backend_identity.h"
#include "proxy/wire/backend_uri.h"
#include "ruleset/rule_set.h"

namespace remold {

class BackendClient;

// `loaded` as it serves: every layer whose adoption is automatic and whose
// LayerKey is not in `in_form` serves as WhileUnconverted says. Pure.
RuleSet ServingRules(const RuleSet& loaded, const std::set<std::string>& in_form);

class AdoptionMonitor {
 public:
  AdoptionMonitor(BackendOptions backend, BackendIdentity identity, std::shared_ptr<RuleSetHolder> serving);
  ~AdoptionMonitor();
  AdoptionMonitor(const AdoptionMonitor&) = delete;
  AdoptionMonitor& operator=(const AdoptionMonitor&) = delete;

  // Puts the rules the files say in force (as ServingRules serves them)
  // and counts what is new or changed since the last load.
  void Load(std::shared_ptr<const RuleSet> loaded);
  // What the other live sidecars of the group write (app/sidecars.h): for
  // each collection, each form and one sidecar that writes it. A rule whose
  // form does not read one of them serves as while documents written
  // before it remain, until none does; then it counts again.
  void OthersWrite(const std::map<std::string, std::map<std::string, std::string>>& writes);
  // Waits until every deciding layer has been counted once (or found
  // uncountable), at most `deadline`; false when some still are not.
  bool AwaitCounts(std::chrono::milliseconds deadline);

  // One deciding layer, for the metrics.
  struct LayerState {
    std::string rule;
    std::string pattern;
    std::string state;  // "counting", "in_form", "not_in_form" or "uncountable"
    int64_t left = 0;   // what the last count found (not_in_form)
  };
  std::vector<LayerState> States() const;

 private:
  enum class State { kCounting, kInForm, kNotInForm, kUncountable };
  struct Layer {
    std::string rule;
    std::string pattern;
    std::vector<UnconvertedProbe> probes;
    State state = State::kCounting;
    int64_t left = 0;
    bool failing = false;  // the last count failed (warned once per streak)
    std::chrono::steady_clock::time_point due;          // the next count
    std::chrono::steady_clock::time_point checkpoint_due;  // the next look at the checkpoint
    // The migration's checkpoint as last seen (Extended JSON, "" for none);
    // none before the first look.
    std::optional<std::string> checkpoint;
  };
  struct Count;  // what one count of a layer found

  // The thread's loop, and what it calls without mutex_ held.
  void Run();
  BackendClient& Client();  // remold's own connection, opened when first used
  Count CountLayer(const std::vector<UnconvertedProbe>& probes);
  void WarnOnce(const UnconvertedProbe& probe);
  std::string CheckpointOf(const UnconvertedProbe& probe);  // Extended JSON, "" when there is none
  // With mutex_ held:
  void Record(Layer& layer, const Count& count);
  void Publish();  // stores ServingRules of the loaded set

  const BackendOptions backend_;
  const BackendIdentity identity_;
  const std::shared_ptr<RuleSetHolder> serving_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::shared_ptr<const RuleSet> loaded_;
  std::map<std::string, Layer> layers_;          // deciding layers, by LayerKey
  std::set<std::string> disturbed_;              // rules another sidecar writes in a form they do not read
  std::vector<UnconvertedProbe> once_;           // the other probes of the last loads, not counted yet
  std::unique_ptr<BackendClient> client_;       // the thread's alone
  std::thread thread_;
};

}  // namespace remold
