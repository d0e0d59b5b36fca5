// What remold knows of the backend's servers at one moment: an immutable
// snapshot the topology monitor (proxy/routing/topology_monitor.h) publishes and
// the sessions route by. Pure data: no sockets, no driver.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "proxy/wire/backend_uri.h"

namespace remold {

// The Server Discovery and Monitoring specification's topology types.
enum class TopologyKind {
  kUnknown,
  kSingle,                  // one standalone (or a directly addressed server)
  kReplicaSetNoPrimary,
  kReplicaSetWithPrimary,
  kSharded,                 // one or more mongos
};

// Its server types (the ones remold routes by; the rest are kOther).
enum class MemberKind { kUnknown, kStandalone, kMongos, kPrimary, kSecondary, kOther };

std::string_view TopologyKindName(TopologyKind kind);  // "ReplicaSetWithPrimary", ...
std::string_view MemberKindName(MemberKind kind);      // "primary", "secondary", ...

struct Member {
  std::string address;  // "host:port", as the monitor names it
  HostAndPort host;
  MemberKind kind = MemberKind::kUnknown;
  std::chrono::microseconds round_trip{0};  // the monitor's moving average
  std::vector<std::pair<std::string, std::string>> tags;
  int64_t last_write_ms = 0;   // lastWrite.lastWriteDate (ms since the epoch); 0: unknown
  int64_t last_update_us = 0;  // when the monitor last heard from it (monotonic µs)
  std::string error;           // why it is unknown ("" when it is not)

  bool data_bearing() const {
    return kind == MemberKind::kStandalone || kind == MemberKind::kPrimary ||
           kind == MemberKind::kSecondary || kind == MemberKind::kMongos;
  }
};

struct TopologyView {
  TopologyKind kind = TopologyKind::kUnknown;
  std::string set_name;  // replica sets only
  std::vector<Member> members;
  std::chrono::milliseconds heartbeat{10'000};
  // False until every seed has been checked once: an unknown member may
  // still be about to answer.
  bool scanned = false;

  const Member* primary() const;
  const Member* Find(std::string_view address) const;
};

}  // namespace remold
