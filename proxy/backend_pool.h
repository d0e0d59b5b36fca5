// One worker's pool of backend connections (pooled mode, --backend-pool-size):
// sessions borrow a connection for a request and give it back after, so
// many clients share few backend connections.
//
// Per member at most `max_per_member` connections are open, leased or
// idle. Each connection carries the identity it authenticated with (a
// client's own login conversation ran on it; "" for none): a session takes
// only connections of its own identity, so a client never runs a request
// as another client's user; a hello takes any (kAnyone). An identity's
// connections are made only by its clients' logins; an unauthenticated
// connection is opened when there is room, or when an idle connection can
// be closed to make room: the identity with the most connections gives
// one up (one no cursor goes back to first), and an identity's last
// connection only once it has been idle for 5 seconds.
//
// A request that finds no connection waits at most `wait_timeout`, first
// come first served: while anyone waits, nobody opens a connection past
// them, and a connection given back goes straight to the first waiter it
// can serve (its own identity's, or a login's when it may be closed to make
// room). So a connection stays idle only when no waiter can use it, and
// anyone it serves may take it. A connection idle for a second or more is
// checked before reuse, and one the backend closed is dropped. A
// transaction's connection is parked between its statements (Park).
//
// Single-threaded: one pool per worker thread, used on that thread only
// (the worker's sockets belong to its io_context). The gauges are atomics
// so a scrape on another thread reads them.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "proxy/asio.h"
#include "proxy/backend_link.h"
#include "proxy/routing/connection_pins.h"

namespace remold {

struct PoolOptions {
  size_t max_per_member = 0;  // 0: pooled mode is off
  std::chrono::milliseconds wait_timeout{10'000};
};

// What a pool shows at /metrics; written by its worker, read by scrapes.
struct PoolGauges {
  std::atomic<int64_t> open{0};      // connections open (leased and idle) or opening
  std::atomic<int64_t> in_use{0};    // leased
  std::atomic<int64_t> waiters{0};   // requests waiting for a connection
  std::atomic<uint64_t> waits{0};    // requests that waited
  std::atomic<uint64_t> wait_microseconds{0};
  std::atomic<uint64_t> timeouts{0};  // waits that ended at wait_timeout
  std::atomic<uint64_t> opened{0};
  std::atomic<uint64_t> closed{0};
  std::array<std::atomic<uint64_t>, static_cast<size_t>(PinReason::kCount)> pins{};
};

class BackendPool {
 public:
  enum class Outcome {
    kTaken,    // `link` is the caller's until Return or Discard
    kOpen,     // room was made: the caller opens a connection (Opened / Abandon)
    kGone,     // the connection asked for by serial, or every one of the identity, is closed
    kTimeout,  // none came within wait_timeout
  };
  struct Grant {
    Outcome outcome;
    std::unique_ptr<BackendLink> link;
  };

  explicit BackendPool(PoolOptions options) : options_(options) {}
  ~BackendPool();
  BackendPool(const BackendPool&) = delete;
  BackendPool& operator=(const BackendPool&) = delete;

  const PoolOptions& options() const { return options_; }
  const PoolGauges& gauges() const { return gauges_; }
  void CountPin(PinReason reason) { gauges_.pins[static_cast<size_t>(reason)].fetch_add(1, std::memory_order_relaxed); }

  // An idle connection to `address` of `identity` (the one `serial` names,
  // when given), or null: no waiting, no opening (the request path's
  // common case, without a coroutine).
  std::unique_ptr<BackendLink> TryTake(const std::string& address, const std::string& identity,
                                       std::optional<uint64_t> serial);
  // The same, or else kOpen when nobody waits and there is room for a new
  // connection (identity "" or kAnyone only), else waiting up to
  // wait_timeout.
  awaitable<Grant> Take(const std::string& address, const std::string& identity, std::optional<uint64_t> serial);

  // After kOpen: the connection opened (it is the caller's, leased, with
  // identity ""), or could not be.
  void Opened(BackendLink& link);
  void Abandon(const std::string& address);
  // A transaction's connection between its statements: parked, for its
  // next statement alone (TakeParked, by its lsid), until Unpark or the
  // transaction's end. One parked longer than a transaction may live
  // (kParkedFor) serves again.
  void Park(const std::string& transaction, std::unique_ptr<BackendLink> link);
  std::unique_ptr<BackendLink> TakeParked(const std::string& transaction);
  void Unpark(const std::string& transaction);
  // The identity of a request any connection may serve (a hello).
  static const std::string kAnyone;

  // A session's cursor goes back to connection `serial`: while any does,
  // others are closed first to make room.
  void HoldAffinity(uint64_t serial) { ++affinities_[serial]; }
  void DropAffinity(uint64_t serial);
  // A leased connection's identity changed (a login on it succeeded).
  void Retag(BackendLink& link, const std::string& identity);
  // A leased connection back: idle again, or closed when it is not clean.
  void Return(std::unique_ptr<BackendLink> link);
  // A leased connection closed and forgotten.
  void Discard(std::unique_ptr<BackendLink> link);

 private:
  // Closes every idle connection (the pool is going).
  void CloseIdle();
  struct Waiter {
    std::string identity;
    std::optional<uint64_t> serial;
    SteadyTimer* timer;
    std::optional<Grant> grant;  // handed over by Return or a close
  };
  struct Member {
    size_t open = 0;  // with those opening
    std::vector<std::unique_ptr<BackendLink>> idle;  // most recently returned last
    std::map<std::string, size_t> open_of;           // identity -> its open connections
    std::map<uint64_t, const BackendLink*> leased;   // serial -> link
    std::deque<Waiter*> waiters;
  };

  Grant TryTakeFrom(Member& member, const std::string& identity, std::optional<uint64_t> serial,
                    bool may_open);
  std::unique_ptr<BackendLink> Lease(Member& member, size_t idle_index);
  // Closes one idle connection of the identity with the most (an
  // identity's last only when idle a while); false when none may go.
  bool EvictIdle(Member& member);
  // Counts a connection about to be opened.
  void Reserve(Member& member);
  void CloseLink(Member& member, std::unique_ptr<BackendLink> link);
  void Forget(Member& member, const std::string& identity);
  // Whether `link` (idle or given back) may be closed to make room.
  bool Evictable(Member& member, const BackendLink& link, std::chrono::steady_clock::time_point now);
  // Hands `link`, given back, to the first waiter it serves; false when
  // none (then it is the caller's still).
  bool HandOver(Member& member, std::unique_ptr<BackendLink>& link);
  // After a connection closed: room for the first login waiting; waiters
  // whose identity or connection is gone are told so.
  void AfterClose(Member& member);
  static void Wake(Waiter* waiter, Grant grant);
  // Returns the connections parked longer than kParkedFor.
  void ReleaseStaleParked();

  const PoolOptions options_;
  PoolGauges gauges_;
  std::map<std::string, Member> members_;
  std::unordered_map<uint64_t, size_t> affinities_;  // serial -> cursors
  struct Parked {
    std::unique_ptr<BackendLink> link;
    std::chrono::steady_clock::time_point since;
  };
  std::map<std::string, Parked> parked_;  // by transaction (lsid)
  std::unordered_set<uint64_t> parked_serials_;
  uint64_t next_serial_ = 1;
};

}  // namespace remold
