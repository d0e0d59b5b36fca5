// The backend pools' series at /metrics (pooled mode only), summed over the
// workers' pools:
//   remold_backend_pool_connections{state="open"|"in_use"}   gauges
//   remold_backend_pool_waiters                             gauge
//   remold_backend_pool_limit                               gauge, per member
//   remold_backend_pool_waits_total, _wait_seconds_total, _timeouts_total
//   remold_backend_pool_opened_total, _closed_total
//   remold_backend_pool_pins_total{reason}
#pragma once

#include <memory>
#include <vector>

#include "proxy/backend_pool.h"

namespace remold {

// Registers the collector with GlobalMetrics(). It does not keep the pools
// alive: a pool gone (its server stopped) counts no more.
void AddPoolMetrics(std::vector<std::weak_ptr<BackendPool>> pools);

}  // namespace remold
