#include "rules/rule_set.h"

namespace remold {

RuleSet::RuleSet(std::vector<Rule> rules) : rules_(std::move(rules)) {
  for (size_t i = 0; i < rules_.size(); ++i) by_namespace_[rules_[i].logical().full()] = i;
}

const Rule* RuleSet::Find(std::string_view db, std::string_view collection) const {
  if (rules_.empty()) return nullptr;
  std::string key;
  key.reserve(db.size() + 1 + collection.size());
  key.append(db).append(".").append(collection);
  auto it = by_namespace_.find(key);
  return it == by_namespace_.end() ? nullptr : &rules_[it->second];
}

}  // namespace remold
