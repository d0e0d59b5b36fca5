// Server selection (the Server Selection and Max Staleness specifications)
// over a TopologyView: which member a request goes to. Pure and
// deterministic given the random draw, so it is unit-tested directly.
//
// remold selects itself rather than calling libmongoc's
// mongoc_client_select_server: that call blocks its thread until a server
// is found, and it runs once per request here, on the proxy's event loop.
// The monitoring (hello on each member, the state machine) is libmongoc's.
#pragma once

#include <bson/bson.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "common/error_code.h"
#include "proxy/routing/topology_view.h"

namespace remold {

struct ReadPreference {
  enum class Mode { kPrimary, kPrimaryPreferred, kSecondary, kSecondaryPreferred, kNearest };
  using TagSet = std::vector<std::pair<std::string, std::string>>;

  Mode mode = Mode::kPrimary;
  std::vector<TagSet> tag_sets;                     // empty: any member
  std::optional<std::chrono::seconds> max_staleness;  // none: no limit
  bool hedge = false;                                // hedged reads asked for

  bool is_primary() const { return mode == Mode::kPrimary; }
};

std::string_view ReadPreferenceModeName(ReadPreference::Mode mode);  // "secondaryPreferred", ...

struct SelectionError {
  ErrorCode code;
  std::string message;
};

// The value of a command's `$readPreference`, validated as mongos does:
// an unknown mode, tags or maxStalenessSeconds with mode primary, a
// negative staleness are errors; a staleness under 90 s, or under the
// monitor's heartbeat plus the servers' 10 s idle write period, is
// MaxStalenessOutOfRange (160).
std::variant<ReadPreference, SelectionError> ParseReadPreference(
    const bson_iter_t& value, std::chrono::milliseconds heartbeat);

// Members within this much of the fastest eligible one share the load
// (the specification's localThresholdMS).
inline constexpr std::chrono::milliseconds kLocalThreshold{15};

// The member a read with `preference` goes to, or null when none is
// eligible now. `random` picks among the members inside the latency
// window. A single server answers whatever the preference; mongos are
// load-balanced.
const Member* SelectForRead(const TopologyView& view, const ReadPreference& preference,
                            uint32_t random);

// The member writes go to: the primary, the single server, or a mongos
// (load-balanced by `random`); null when there is none now.
const Member* SelectForWrite(const TopologyView& view, uint32_t random);

// A secondary's estimated staleness per the Max Staleness specification,
// in milliseconds (0 for the primary).
int64_t EstimatedStalenessMs(const TopologyView& view, const Member& member);

}  // namespace remold
