#include "app/rule_reloader.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <variant>

#include "ruleset/loader.h"

namespace remold {

namespace {

std::string Describe(const Rule& rule) { return rule.Describe(); }

std::string Named(const Rule& rule) {
  return "rule '" + rule.name + "' (" + std::string(rule.pattern_name()) + ", " +
         rule.logical().full() + ")";
}

std::string Removed(const Rule& rule) {
  return Named(rule) + " removed: " + rule.OnRemoval();
}

std::string Added(const Rule& rule) {
  return Named(rule) + " added: " + rule.OnAddition();
}

}  // namespace

std::vector<std::string> RuleChangeWarnings(const RuleSet& before, const RuleSet& after) {
  std::vector<std::string> warnings;
  for (const Rule& old_rule : before.rules()) {
    const Namespace& ns = old_rule.logical();
    const Rule* now = after.Find(ns.db, ns.collection);
    if (!now || now->pattern_name() != old_rule.pattern_name()) {
      warnings.push_back(Removed(old_rule));
    } else if (Describe(*now) != Describe(old_rule)) {
      warnings.push_back(Named(*now) + " changed from '" + Describe(old_rule) + "' to '" +
                         Describe(*now) + "': data stored under the old form is not converted");
    }
  }
  for (const Rule& new_rule : after.rules()) {
    const Namespace& ns = new_rule.logical();
    const Rule* was = before.Find(ns.db, ns.collection);
    if (!was || was->pattern_name() != new_rule.pattern_name()) warnings.push_back(Added(new_rule));
  }
  return warnings;
}

RuleReloader::RuleReloader(std::string directory, std::shared_ptr<RuleSetHolder> holder)
    : directory_(std::move(directory)), holder_(std::move(holder)) {}

RuleReloader::~RuleReloader() {
  {
    std::lock_guard lock(stop_mutex_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();
}

std::vector<std::string> RuleReloader::Reload(const char* reason) {
  std::lock_guard lock(reload_mutex_);
  loaded_signature_ = Signature();  // before the load: a change during it is seen next time
  RuleLoadResult result = LoadRuleDirectory(directory_);
  if (!result.errors.empty()) {
    failures_.fetch_add(1);
    spdlog::error("rules: reload ({}) of {} failed; the rules in force stay:", reason, directory_);
    for (const auto& error : result.errors) spdlog::error("rules:   {}", error);
    return result.errors;
  }
  reloads_.fetch_add(1);
  spdlog::info("rules: loaded {} rule(s) from {} ({})", result.rules->rules().size(), directory_,
               reason);
  std::shared_ptr<const RuleSet> before = holder_->Load();
  std::shared_ptr<const RuleSet> after = result.rules;
  if (loaded_) {
    for (const auto& warning : RuleChangeWarnings(*before, *after)) spdlog::warn("rules: {}", warning);
  }
  const bool change = loaded_;
  loaded_ = true;
  holder_->Store(std::move(result.rules));
  if (change && on_change_) on_change_(*before, *after);
  return {};
}

void RuleReloader::SetOnChange(OnChange on_change) {
  std::lock_guard lock(reload_mutex_);
  on_change_ = std::move(on_change);
}

std::string RuleReloader::Signature() const {
  namespace fs = std::filesystem;
  std::string signature;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(directory_, ec)) {
    const fs::path& path = entry.path();
    signature += path.filename().string();
    if (fs::is_symlink(path, ec)) signature += "->" + fs::read_symlink(path, ec).string();
    auto size = fs::file_size(path, ec);
    if (!ec) signature += ":" + std::to_string(size);
    auto time = fs::last_write_time(path, ec);
    if (!ec) signature += "@" + std::to_string(time.time_since_epoch().count());
    signature += "\n";
  }
  return signature;
}

void RuleReloader::Watch(std::chrono::milliseconds interval) {
  watcher_ = std::thread([this, interval] {
    std::unique_lock lock(stop_mutex_);
    while (!stop_cv_.wait_for(lock, interval, [this] { return stopping_; })) {
      lock.unlock();
      const std::string now = Signature();
      bool changed;
      {
        std::lock_guard reload_lock(reload_mutex_);
        changed = now != loaded_signature_;
      }
      if (changed) Reload("files changed");
      lock.lock();
    }
  });
}

}  // namespace remold
