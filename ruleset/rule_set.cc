#include "ruleset/rule_set.h"

#include <algorithm>

namespace remold {

RuleSet::RuleSet(std::vector<Rule> rules) : rules_(std::move(rules)) {
  auto add_name = [this](const std::string& collection) {
    if (std::find(collection_names_.begin(), collection_names_.end(), collection) == collection_names_.end())
      collection_names_.push_back(collection);
  };
  for (size_t i = 0; i < rules_.size(); ++i) {
    by_namespace_[rules_[i].logical().full()] = i;
    add_name(rules_[i].logical().collection);
    for (const Namespace& ns : rules_[i].Watches()) {
      by_watched_[ns.full()] = i;
      add_name(ns.collection);
    }
  }
}

bool RuleSet::MayConcern(std::string_view collection) const {
  return std::find(collection_names_.begin(), collection_names_.end(), collection) != collection_names_.end();
}

namespace {

std::string KeyOf(std::string_view db, std::string_view collection) {
  std::string key;
  key.reserve(db.size() + 1 + collection.size());
  key.append(db).append(".").append(collection);
  return key;
}

const Rule* Lookup(const std::vector<Rule>& rules, const std::unordered_map<std::string, size_t>& index,
                   const std::string& key) {
  if (index.empty()) return nullptr;
  auto it = index.find(key);
  return it == index.end() ? nullptr : &rules[it->second];
}

}  // namespace

const Rule* RuleSet::Find(std::string_view db, std::string_view collection) const {
  return Lookup(rules_, by_namespace_, KeyOf(db, collection));
}

const Rule* RuleSet::FindWatcher(std::string_view db, std::string_view collection) const {
  return Lookup(rules_, by_watched_, KeyOf(db, collection));
}

const Rule* RuleSet::FindForCommand(std::string_view db, std::string_view collection) const {
  const std::string key = KeyOf(db, collection);
  const Rule* rule = Lookup(rules_, by_namespace_, key);
  return rule ? rule : Lookup(rules_, by_watched_, key);
}

}  // namespace remold
