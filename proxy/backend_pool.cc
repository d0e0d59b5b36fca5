#include "proxy/backend_pool.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace remold {
namespace {

using Clock = std::chrono::steady_clock;

// A connection unused for this long is checked before it is used again.
constexpr std::chrono::seconds kIdleCheckAfter{1};

// An identity's last connection is not closed to make room before it has
// been idle this long.
constexpr std::chrono::seconds kLastOfIdentityKeptFor{5};

// A transaction's connection parked longer than this serves again: the
// server's transactionLifetimeLimitSeconds is 60 by default.
constexpr std::chrono::seconds kParkedFor{120};

// How often a waiting login looks for a connection it may close.
constexpr std::chrono::milliseconds kLookAgainAfter{250};

void Add(std::atomic<int64_t>& gauge, int64_t delta) { gauge.fetch_add(delta, std::memory_order_relaxed); }
void Count(std::atomic<uint64_t>& counter, uint64_t n = 1) { counter.fetch_add(n, std::memory_order_relaxed); }

}  // namespace

const std::string BackendPool::kAnyone("*");

BackendPool::~BackendPool() {
  for (auto& [transaction, parked] : parked_) parked.link->stream->Close();
  CloseIdle();
}

void BackendPool::Park(const std::string& transaction, std::unique_ptr<BackendLink> link) {
  Unpark(transaction);  // an older connection of the same lsid
  link->last_used = Clock::now();
  parked_serials_.insert(link->serial);
  parked_[transaction] = Parked{std::move(link), Clock::now()};
}

std::unique_ptr<BackendLink> BackendPool::TakeParked(const std::string& transaction) {
  auto it = parked_.find(transaction);
  if (it == parked_.end()) return nullptr;
  std::unique_ptr<BackendLink> link = std::move(it->second.link);
  parked_.erase(it);
  if (link) parked_serials_.erase(link->serial);
  return link;
}

void BackendPool::Unpark(const std::string& transaction) {
  if (std::unique_ptr<BackendLink> link = TakeParked(transaction)) Return(std::move(link));
}

void BackendPool::ReleaseStaleParked() {
  const Clock::time_point now = Clock::now();
  std::vector<std::string> stale;
  for (const auto& [transaction, parked] : parked_)
    if (now - parked.since >= kParkedFor) stale.push_back(transaction);
  for (const std::string& transaction : stale) Unpark(transaction);
}

BackendPool::Grant BackendPool::TryTakeFrom(Member& member, const std::string& identity,
                                            std::optional<uint64_t> serial, bool may_open) {
  const Clock::time_point now = Clock::now();
  // Most recently returned first: the fewest connections stay warm.
  for (size_t i = member.idle.size(); i-- > 0;) {
    BackendLink& link = *member.idle[i];
    if (serial ? link.serial != *serial : identity != kAnyone && link.identity != identity) continue;
    if (now - link.last_used >= kIdleCheckAfter && link.stream->PeerClosed()) {
      spdlog::info("pool: backend {} closed an idle pooled connection; dropping it",
                   link.address.empty() ? "(direct)" : link.address);
      std::unique_ptr<BackendLink> closed = std::move(member.idle[i]);
      member.idle.erase(member.idle.begin() + static_cast<std::ptrdiff_t>(i));
      CloseLink(member, std::move(closed));
      continue;
    }
    return {Outcome::kTaken, Lease(member, i)};
  }
  if (serial) {
    // Parked for a transaction, or closed: any connection will do.
    const bool waits = member.leased.contains(*serial) && !parked_serials_.contains(*serial);
    return {waits ? Outcome::kTimeout : Outcome::kGone, nullptr};
  }
  // Only its clients' logins make an identity's connections.
  if (!identity.empty() && identity != kAnyone)
    return {member.open_of.contains(identity) ? Outcome::kTimeout : Outcome::kGone, nullptr};
  if (may_open && (member.open < options_.max_per_member || EvictIdle(member))) {
    Reserve(member);
    return {Outcome::kOpen, nullptr};
  }
  return {Outcome::kTimeout, nullptr};
}

void BackendPool::Reserve(Member& member) {
  ++member.open;
  Add(gauges_.open, 1);
  Add(gauges_.in_use, 1);
}

std::unique_ptr<BackendLink> BackendPool::TryTake(const std::string& address, const std::string& identity,
                                                  std::optional<uint64_t> serial) {
  // An idle connection is one no waiter could use: taking it passes nobody.
  Grant grant = TryTakeFrom(members_[address], identity, serial, false);
  return grant.outcome == Outcome::kTaken ? std::move(grant.link) : nullptr;
}

awaitable<BackendPool::Grant> BackendPool::Take(const std::string& address, const std::string& identity,
                                                std::optional<uint64_t> serial) {
  Member& member = members_[address];  // std::map: stays valid
  {
    Grant grant = TryTakeFrom(member, identity, serial, member.waiters.empty());
    if (grant.outcome != Outcome::kTimeout) co_return grant;
  }
  if (!parked_.empty()) ReleaseStaleParked();
  const Clock::time_point started = Clock::now();
  const Clock::time_point deadline = started + options_.wait_timeout;
  // A login also looks again now and then: an identity's last connection
  // may be closed once it has idled long enough, which no event announces.
  const bool opens = !serial && (identity.empty() || identity == kAnyone);
  SteadyTimer timer(co_await asio::this_coro::executor);
  Waiter waiter{identity, serial, &timer, std::nullopt};
  member.waiters.push_back(&waiter);
  Add(gauges_.waiters, 1);
  Count(gauges_.waits);
  for (;;) {
    timer.expires_at(opens ? std::min(deadline, Clock::now() + kLookAgainAfter) : deadline);
    boost::system::error_code ignored;
    co_await timer.async_wait(asio::redirect_error(use_awaitable, ignored));
    if (waiter.grant || Clock::now() >= deadline) break;
    if (opens && member.open >= options_.max_per_member && EvictIdle(member)) {
      Reserve(member);
      waiter.grant = Grant{Outcome::kOpen, nullptr};
      break;
    }
  }
  std::erase(member.waiters, &waiter);
  Add(gauges_.waiters, -1);
  Count(gauges_.wait_microseconds,
        static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - started).count()));
  if (waiter.grant) co_return std::move(*waiter.grant);
  Count(gauges_.timeouts);
  co_return Grant{Outcome::kTimeout, nullptr};
}

void BackendPool::Wake(Waiter* waiter, Grant grant) {
  waiter->grant = std::move(grant);
  waiter->timer->cancel();
}

std::unique_ptr<BackendLink> BackendPool::Lease(Member& member, size_t idle_index) {
  std::unique_ptr<BackendLink> link = std::move(member.idle[idle_index]);
  member.idle.erase(member.idle.begin() + static_cast<std::ptrdiff_t>(idle_index));
  member.leased[link->serial] = link.get();
  link->last_used = Clock::now();
  Add(gauges_.in_use, 1);
  return link;
}

void BackendPool::Opened(BackendLink& link) {
  Member& member = members_[link.address];
  link.serial = next_serial_++;
  link.identity.clear();
  ++member.open_of[link.identity];
  member.leased[link.serial] = &link;
  Count(gauges_.opened);
}

void BackendPool::Abandon(const std::string& address) {
  Member& member = members_[address];
  --member.open;
  Add(gauges_.open, -1);
  Add(gauges_.in_use, -1);
  AfterClose(member);
}

void BackendPool::Retag(BackendLink& link, const std::string& identity) {
  Member& member = members_[link.address];
  Forget(member, link.identity);
  link.identity = identity;
  ++member.open_of[identity];
}

void BackendPool::Return(std::unique_ptr<BackendLink> link) {
  Member& member = members_[link->address];
  if (!link->stream->socket().is_open() || link->stream->HasPendingInput()) {
    Discard(std::move(link));
    return;
  }
  link->last_used = Clock::now();
  if (HandOver(member, link)) return;
  member.leased.erase(link->serial);
  Add(gauges_.in_use, -1);
  member.idle.push_back(std::move(link));
}

bool BackendPool::HandOver(Member& member, std::unique_ptr<BackendLink>& link) {
  const Clock::time_point now = Clock::now();
  for (Waiter* waiter : member.waiters) {
    if (waiter->grant) continue;
    if (waiter->serial ? *waiter->serial == link->serial
                       : waiter->identity == link->identity || waiter->identity == kAnyone) {
      Wake(waiter, {Outcome::kTaken, std::move(link)});  // still leased, now the waiter's
      return true;
    }
    if (!waiter->serial && waiter->identity.empty() && Evictable(member, *link, now)) {
      // A login waits for room: this connection makes it (its slot goes
      // over to the new one).
      member.leased.erase(link->serial);
      link->stream->Close();
      Forget(member, link->identity);
      Count(gauges_.closed);
      link.reset();
      Wake(waiter, {Outcome::kOpen, nullptr});
      return true;
    }
  }
  return false;
}

void BackendPool::Discard(std::unique_ptr<BackendLink> link) {
  Member& member = members_[link->address];
  member.leased.erase(link->serial);
  Add(gauges_.in_use, -1);
  CloseLink(member, std::move(link));
}

void BackendPool::CloseLink(Member& member, std::unique_ptr<BackendLink> link) {
  link->stream->Close();
  Forget(member, link->identity);
  --member.open;
  Add(gauges_.open, -1);
  Count(gauges_.closed);
  AfterClose(member);
}

void BackendPool::AfterClose(Member& member) {
  bool room = member.open < options_.max_per_member;
  for (Waiter* waiter : member.waiters) {
    if (waiter->grant) continue;
    if (waiter->serial) {
      if (!member.leased.contains(*waiter->serial)) Wake(waiter, {Outcome::kGone, nullptr});
    } else if (!waiter->identity.empty() && waiter->identity != kAnyone) {
      if (!member.open_of.contains(waiter->identity)) Wake(waiter, {Outcome::kGone, nullptr});
    } else if (room) {
      Reserve(member);
      Wake(waiter, {Outcome::kOpen, nullptr});
      room = false;
    }
  }
}

void BackendPool::Forget(Member& member, const std::string& identity) {
  auto it = member.open_of.find(identity);
  if (it != member.open_of.end() && --it->second == 0) member.open_of.erase(it);
}

void BackendPool::DropAffinity(uint64_t serial) {
  auto it = affinities_.find(serial);
  if (it != affinities_.end() && --it->second == 0) affinities_.erase(it);
}

bool BackendPool::Evictable(Member& member, const BackendLink& link, Clock::time_point now) {
  // A waiter asks for it. (A cursor's may go: the server keeps cursors by
  // session and user, and its getMore then goes to another connection.)
  for (const Waiter* waiter : member.waiters)
    if (waiter->serial == link.serial) return false;
  if (link.identity.empty()) return true;
  // An identity's last connection goes only once idle a while: its clients
  // could not get another without logging in again.
  return member.open_of[link.identity] > 1 || now - link.last_used >= kLastOfIdentityKeptFor;
}

bool BackendPool::EvictIdle(Member& member) {
  // The identity with the most connections gives one up, one no cursor
  // goes back to first.
  const Clock::time_point now = Clock::now();
  std::optional<size_t> victim;
  std::pair<bool, size_t> best{false, 0};  // (no cursor, the identity's connections)
  for (size_t i = 0; i < member.idle.size(); ++i) {
    const BackendLink& link = *member.idle[i];
    if (!Evictable(member, link, now)) continue;
    const std::pair<bool, size_t> rank{!affinities_.contains(link.serial), member.open_of[link.identity]};
    if (!victim || rank > best) {
      victim = i;
      best = rank;
    }
  }
  if (!victim) return false;
  std::unique_ptr<BackendLink> link = std::move(member.idle[*victim]);
  member.idle.erase(member.idle.begin() + static_cast<std::ptrdiff_t>(*victim));
  link->stream->Close();
  Forget(member, link->identity);
  --member.open;
  Add(gauges_.open, -1);
  Count(gauges_.closed);
  return true;
}

void BackendPool::CloseIdle() {
  for (auto& [address, member] : members_) {
    for (std::unique_ptr<BackendLink>& link : member.idle) {
      link->stream->Close();
      Forget(member, link->identity);
      --member.open;
      Add(gauges_.open, -1);
      Count(gauges_.closed);
    }
    member.idle.clear();
  }
}

}  // namespace remold
