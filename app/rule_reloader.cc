#include "app/rule_reloader.h"

#include <spdlog/spdlog.h>

#include <filesystem>

#include "rules/loader.h"

namespace remold {

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
  holder_->Store(std::move(result.rules));
  return {};
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
    std::string last = Signature();
    std::unique_lock lock(stop_mutex_);
    while (!stop_cv_.wait_for(lock, interval, [this] { return stopping_; })) {
      lock.unlock();
      std::string now = Signature();
      if (now != last) {
        last = now;
        Reload("files changed");
      }
      lock.lock();
    }
  });
}

}  // namespace remold
