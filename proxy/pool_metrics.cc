#include "proxy/pool_metrics.h"

#include <string>

#include "proxy/metrics.h"

namespace remold {

void AddPoolMetrics(std::vector<std::weak_ptr<BackendPool>> weak_pools) {
  GlobalMetrics().AddCollector([weak_pools = std::move(weak_pools)](prometheus::TextWriter& out) {
    std::vector<std::shared_ptr<BackendPool>> pools;
    for (const auto& weak : weak_pools)
      if (std::shared_ptr<BackendPool> pool = weak.lock()) pools.push_back(std::move(pool));
    auto sum = [&pools](auto read) {
      uint64_t total = 0;
      for (const auto& pool : pools) total += static_cast<uint64_t>(read(pool->gauges()));
      return total;
    };
    constexpr auto kRelaxed = std::memory_order_relaxed;
    out.Family("remold_backend_pool_connections", "gauge",
               "Pooled backend connections: open (leased, idle or opening) and in use (leased).");
    out.Sample("remold_backend_pool_connections", {{"state", "open"}},
               sum([](const PoolGauges& g) { return g.open.load(kRelaxed); }));
    out.Sample("remold_backend_pool_connections", {{"state", "in_use"}},
               sum([](const PoolGauges& g) { return g.in_use.load(kRelaxed); }));
    out.Family("remold_backend_pool_limit", "gauge", "The most pooled connections open to one member.");
    uint64_t limit = 0;
    for (const auto& pool : pools) limit += pool->options().max_per_member;
    out.Sample("remold_backend_pool_limit", {}, limit);
    out.Family("remold_backend_pool_waiters", "gauge", "Requests waiting for a pooled connection.");
    out.Sample("remold_backend_pool_waiters", {}, sum([](const PoolGauges& g) { return g.waiters.load(kRelaxed); }));
    out.Family("remold_backend_pool_waits_total", "counter", "Requests that waited for a pooled connection.");
    out.Sample("remold_backend_pool_waits_total", {}, sum([](const PoolGauges& g) { return g.waits.load(kRelaxed); }));
    out.Family("remold_backend_pool_wait_seconds_total", "counter", "Time requests spent waiting for a pooled connection.");
    out.Sample("remold_backend_pool_wait_seconds_total", {},
               static_cast<double>(sum([](const PoolGauges& g) { return g.wait_microseconds.load(kRelaxed); })) / 1e6);
    out.Family("remold_backend_pool_timeouts_total", "counter",
               "Requests refused after waiting the pool's wait timeout (waitQueueTimeoutMS).");
    out.Sample("remold_backend_pool_timeouts_total", {},
               sum([](const PoolGauges& g) { return g.timeouts.load(kRelaxed); }));
    out.Family("remold_backend_pool_opened_total", "counter", "Pooled backend connections opened.");
    out.Sample("remold_backend_pool_opened_total", {}, sum([](const PoolGauges& g) { return g.opened.load(kRelaxed); }));
    out.Family("remold_backend_pool_closed_total", "counter", "Pooled backend connections closed.");
    out.Sample("remold_backend_pool_closed_total", {}, sum([](const PoolGauges& g) { return g.closed.load(kRelaxed); }));
    out.Family("remold_backend_pool_pins_total", "counter",
               "Requests or clients that kept a pooled connection, by reason (proxy/routing/connection_pins.h).");
    for (size_t reason = 0; reason < static_cast<size_t>(PinReason::kCount); ++reason) {
      const std::string name(PinReasonName(static_cast<PinReason>(reason)));
      out.Sample("remold_backend_pool_pins_total", {{"reason", name}},
                 sum([reason](const PoolGauges& g) { return g.pins[reason].load(kRelaxed); }));
    }
  });
}

}  // namespace remold
