#include "proxy/routing/route_pins.h"

namespace remold {

void RoutePins::Pin(const std::string& key, const std::string& address) {
  std::lock_guard lock(mutex_);
  auto [it, added] = pins_.insert_or_assign(key, address);
  if (!added) return;
  order_.push_back(key);
  while (order_.size() > capacity_) {
    pins_.erase(order_.front());  // may already be gone: Unpin leaves the key in order_
    order_.pop_front();
  }
}

std::optional<std::string> RoutePins::Find(const std::string& key) const {
  std::lock_guard lock(mutex_);
  auto found = pins_.find(key);
  if (found == pins_.end()) return std::nullopt;
  return found->second;
}

void RoutePins::Unpin(const std::string& key) {
  std::lock_guard lock(mutex_);
  pins_.erase(key);
}

size_t RoutePins::size() const {
  std::lock_guard lock(mutex_);
  return pins_.size();
}

}  // namespace remold
