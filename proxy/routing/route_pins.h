// Which member a cursor or a transaction lives on, shared by all sessions:
// drivers send a cursor's getMore, or a transaction's next statement, on
// whichever pooled connection is free, so the pin cannot be per session.
//
// Bounded: past `capacity` entries the oldest are forgotten (a forgotten
// cursor's getMore goes to the primary, which answers CursorNotFound if the
// cursor was elsewhere). Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace remold {

class RoutePins {
 public:
  explicit RoutePins(size_t capacity = 65536) : capacity_(capacity) {}

  void Pin(const std::string& key, const std::string& address);
  std::optional<std::string> Find(const std::string& key) const;
  void Unpin(const std::string& key);
  size_t size() const;

  // The key of a cursor (ids are per server, but random 64-bit numbers).
  static std::string CursorKey(int64_t id) { return std::string(reinterpret_cast<const char*>(&id), sizeof id); }

 private:
  const size_t capacity_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::string> pins_;
  std::deque<std::string> order_;  // insertion order, for forgetting the oldest
};

struct RoutingPins {
  RoutePins cursors;
  RoutePins transactions{16384};
};

}  // namespace remold
