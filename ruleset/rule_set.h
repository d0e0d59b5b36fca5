// RuleSet: the rules in force, indexed by logical namespace. Immutable once
// built; a reload builds a new one and swaps it in whole (see RuleSetHolder).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ruleset/rule.h"

namespace remold {

class RuleSet {
 public:
  RuleSet() = default;
  explicit RuleSet(std::vector<Rule> rules);

  // The rule for "db.collection", or nullptr.
  const Rule* Find(std::string_view db, std::string_view collection) const;
  // The rule that watches "db.collection" (Rule::Watches), or nullptr.
  const Rule* FindWatcher(std::string_view db, std::string_view collection) const;
  // The rule whose plans a command on "db.collection" runs: its own rule,
  // or else the rule that watches it.
  // (Asked of every command while rules are loaded: one key for both maps.)
  const Rule* FindForCommand(std::string_view db, std::string_view collection) const;
  // Whether a rule has a collection of that name, in any database, as its
  // logical collection or one it watches: false means FindForCommand is
  // nullptr whatever the database (a first filter, no key built).
  bool MayConcern(std::string_view collection) const;
  const std::vector<Rule>& rules() const { return rules_; }
  bool empty() const { return rules_.empty(); }

 private:
  std::vector<Rule> rules_;
  std::unordered_map<std::string, size_t> by_namespace_;
  std::unordered_map<std::string, size_t> by_watched_;
  std::vector<std::string> collection_names_;  // of both maps' keys, each once
};

// The current RuleSet, shared by every session and replaced atomically.
// A request loads it once and keeps that set for its whole life, so a
// reload never changes the rules under an in-flight request.
class RuleSetHolder {
 public:
  RuleSetHolder() : current_(std::make_shared<const RuleSet>()) {}
  std::shared_ptr<const RuleSet> Load() const { return current_.load(); }
  void Store(std::shared_ptr<const RuleSet> rules) { current_.store(std::move(rules)); }

 private:
  std::atomic<std::shared_ptr<const RuleSet>> current_;
};

}  // namespace remold
