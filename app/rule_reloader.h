// Keeps the RuleSet in force in step with the rules directory.
//
// Reload() loads the whole directory; a valid result is swapped in
// atomically, an invalid one is logged line by line and the rules in force
// stay. Watch() polls the directory once a second (file names, sizes,
// modification times, and symlink targets, so Kubernetes ConfigMap updates
// are seen) and reloads on change. SIGHUP calls Reload() directly.
//
// Data stays where a rule put it: a reload that drops, adds or changes a
// rule logs a warning per rule saying what becomes of the stored data
// (RuleChangeWarnings).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ruleset/rule_set.h"

namespace remold {

// One warning per rule that `after` drops, adds or changes compared with
// `before` (rules are matched by logical namespace; a changed pattern is a
// removal and an addition; a change is a different `Describe()`), each
// naming the rule, its pattern and collection and what becomes of the data.
std::vector<std::string> RuleChangeWarnings(const RuleSet& before, const RuleSet& after);

class RuleReloader {
 public:
  RuleReloader(std::string directory, std::shared_ptr<RuleSetHolder> holder);
  ~RuleReloader();

  // Loads the directory; returns the errors (empty: loaded and in force).
  std::vector<std::string> Reload(const char* reason);
  // Called after each later load that is put in force, with the rules it
  // replaced (on the thread that reloads: the watcher's, or SIGHUP's).
  using OnChange = std::function<void(const RuleSet& before, const RuleSet& after)>;
  void SetOnChange(OnChange on_change);
  void Watch(std::chrono::milliseconds interval);

  uint64_t reloads() const { return reloads_.load(); }
  uint64_t failures() const { return failures_.load(); }

 private:
  std::string Signature() const;

  const std::string directory_;
  std::shared_ptr<RuleSetHolder> holder_;
  std::mutex reload_mutex_;
  std::mutex stop_mutex_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread watcher_;
  std::atomic<uint64_t> reloads_{0};
  std::atomic<uint64_t> failures_{0};
  bool loaded_ = false;  // a set is in force: later loads are changes to it
  // The directory's Signature() taken just before the last load (guarded by
  // reload_mutex_): the watcher reloads when the directory differs from it,
  // so a file written while remold starts is never missed.
  std::string loaded_signature_;
  OnChange on_change_;   // guarded by reload_mutex_
};

}  // namespace remold
