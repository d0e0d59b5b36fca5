#include "proxy/routing/server_selection.h"

#include <algorithm>
#include <string_view>

#include "common/doc.h"

namespace remold {
namespace {

using Mode = ReadPreference::Mode;

// The servers' idle write period: a primary writes at least this often,
// which bounds how stale lastWriteDate can look on an idle set.
constexpr int64_t kIdleWritePeriodSeconds = 10;
// mongos's floor for maxStalenessSeconds.
constexpr int64_t kSmallestMaxStalenessSeconds = 90;

constexpr ErrorCode kMaxStalenessOutOfRange{160, "MaxStalenessOutOfRange"};

std::optional<Mode> ParseMode(std::string_view name) {
  if (name == "primary") return Mode::kPrimary;
  if (name == "primaryPreferred") return Mode::kPrimaryPreferred;
  if (name == "secondary") return Mode::kSecondary;
  if (name == "secondaryPreferred") return Mode::kSecondaryPreferred;
  if (name == "nearest") return Mode::kNearest;
  return std::nullopt;
}

SelectionError Invalid(ErrorCode code, std::string message) {
  return SelectionError{code, std::move(message)};
}

std::optional<double> NumberOf(const bson_iter_t& iter) {
  if (!BSON_ITER_HOLDS_NUMBER(&iter)) return std::nullopt;
  return bson_iter_as_double(&iter);
}

// A tag set: {name: "value", ...}; every value a string.
std::optional<ReadPreference::TagSet> ParseTagSet(const bson_iter_t& value) {
  if (!BSON_ITER_HOLDS_DOCUMENT(&value)) return std::nullopt;
  ReadPreference::TagSet tags;
  bool valid = true;
  ForEachChild(value, [&](std::string_view key, const bson_iter_t& tag) {
    if (!BSON_ITER_HOLDS_UTF8(&tag)) {
      valid = false;
      return;
    }
    tags.emplace_back(std::string(key), std::string(bson_iter_utf8(&tag, nullptr)));
  });
  if (!valid) return std::nullopt;
  return tags;
}

bool Matches(const Member& member, const ReadPreference::TagSet& tags) {
  return std::all_of(tags.begin(), tags.end(), [&](const auto& wanted) {
    return std::find(member.tags.begin(), member.tags.end(), wanted) != member.tags.end();
  });
}

// Keeps the members that match the first tag set any member matches (the
// specification's order of preference); none when none does.
void FilterByTags(std::vector<const Member*>& candidates, const std::vector<ReadPreference::TagSet>& sets) {
  if (sets.empty()) return;
  for (const ReadPreference::TagSet& set : sets) {
    std::vector<const Member*> matching;
    for (const Member* member : candidates)
      if (Matches(*member, set)) matching.push_back(member);
    if (!matching.empty()) {
      candidates = std::move(matching);
      return;
    }
  }
  candidates.clear();
}

void FilterByStaleness(const TopologyView& view, std::vector<const Member*>& candidates,
                       const ReadPreference& preference) {
  if (!preference.max_staleness) return;
  const int64_t limit_ms = preference.max_staleness->count() * 1000;
  std::erase_if(candidates, [&](const Member* member) {
    return member->kind == MemberKind::kSecondary && EstimatedStalenessMs(view, *member) > limit_ms;
  });
}

// One member inside the latency window of the fastest candidate.
const Member* PickNearest(std::vector<const Member*> candidates, uint32_t random) {
  if (candidates.empty()) return nullptr;
  auto fastest = std::min_element(candidates.begin(), candidates.end(), [](const Member* a, const Member* b) {
    return a->round_trip < b->round_trip;
  });
  const auto window = (*fastest)->round_trip + kLocalThreshold;
  std::erase_if(candidates, [&](const Member* member) { return member->round_trip > window; });
  return candidates[random % candidates.size()];
}

std::vector<const Member*> OfKind(const TopologyView& view, MemberKind kind) {
  std::vector<const Member*> members;
  for (const Member& member : view.members)
    if (member.kind == kind) members.push_back(&member);
  return members;
}

const Member* SelectSecondary(const TopologyView& view, const ReadPreference& preference,
                              uint32_t random) {
  std::vector<const Member*> candidates = OfKind(view, MemberKind::kSecondary);
  FilterByStaleness(view, candidates, preference);
  FilterByTags(candidates, preference.tag_sets);
  return PickNearest(std::move(candidates), random);
}

const Member* SelectInReplicaSet(const TopologyView& view, const ReadPreference& preference,
                                 uint32_t random) {
  const Member* primary = view.primary();
  switch (preference.mode) {
    case Mode::kPrimary:
      return primary;
    case Mode::kPrimaryPreferred:
      return primary ? primary : SelectSecondary(view, preference, random);
    case Mode::kSecondary:
      return SelectSecondary(view, preference, random);
    case Mode::kSecondaryPreferred: {
      const Member* secondary = SelectSecondary(view, preference, random);
      return secondary ? secondary : primary;
    }
    case Mode::kNearest: {
      std::vector<const Member*> candidates = OfKind(view, MemberKind::kSecondary);
      if (primary) candidates.push_back(primary);
      FilterByStaleness(view, candidates, preference);
      FilterByTags(candidates, preference.tag_sets);
      return PickNearest(std::move(candidates), random);
    }
  }
  return nullptr;
}

const Member* TheSingleServer(const TopologyView& view) {
  for (const Member& member : view.members)
    if (member.data_bearing()) return &member;
  return nullptr;
}

}  // namespace

std::string_view ReadPreferenceModeName(Mode mode) {
  switch (mode) {
    case Mode::kPrimary: return "primary";
    case Mode::kPrimaryPreferred: return "primaryPreferred";
    case Mode::kSecondary: return "secondary";
    case Mode::kSecondaryPreferred: return "secondaryPreferred";
    case Mode::kNearest: return "nearest";
  }
  return "primary";
}

std::variant<ReadPreference, SelectionError> ParseReadPreference(const bson_iter_t& value,
                                                                 std::chrono::milliseconds heartbeat) {
  if (!BSON_ITER_HOLDS_DOCUMENT(&value))
    return Invalid(error_codes::kTypeMismatch, "$readPreference must be an object");
  ReadPreference out;
  std::optional<std::string> mode_name;
  std::optional<SelectionError> error;
  bool has_tags = false;
  ForEachChild(value, [&](std::string_view key, const bson_iter_t& field) {
    if (error) return;
    if (key == "mode") {
      if (!BSON_ITER_HOLDS_UTF8(&field)) {
        error = Invalid(error_codes::kTypeMismatch, "$readPreference mode must be a string");
        return;
      }
      mode_name = bson_iter_utf8(&field, nullptr);
    } else if (key == "tags") {
      if (!BSON_ITER_HOLDS_ARRAY(&field)) {
        error = Invalid(error_codes::kTypeMismatch, "$readPreference tags must be an array of tag sets");
        return;
      }
      ForEachChild(field, [&](std::string_view, const bson_iter_t& set) {
        if (error) return;
        std::optional<ReadPreference::TagSet> tags = ParseTagSet(set);
        if (!tags) {
          error = Invalid(error_codes::kTypeMismatch,
                          "$readPreference tags must be objects whose values are strings");
          return;
        }
        if (!tags->empty()) has_tags = true;
        out.tag_sets.push_back(std::move(*tags));
      });
    } else if (key == "maxStalenessSeconds") {
      std::optional<double> seconds = NumberOf(field);
      if (!seconds) {
        error = Invalid(error_codes::kTypeMismatch, "maxStalenessSeconds must be a number");
      } else if (*seconds < 0) {
        error = Invalid(error_codes::kBadValue, "maxStalenessSeconds must be a non-negative number");
      } else if (*seconds > 0) {
        out.max_staleness = std::chrono::seconds(static_cast<int64_t>(*seconds));
      }
    } else if (key == "hedge") {
      if (!BSON_ITER_HOLDS_DOCUMENT(&field)) {
        error = Invalid(error_codes::kTypeMismatch, "$readPreference hedge must be an object");
        return;
      }
      bson_iter_t enabled;
      out.hedge = true;
      if (bson_iter_recurse(&field, &enabled) && bson_iter_find(&enabled, "enabled"))
        out.hedge = bson_iter_as_bool(&enabled);
    } else {
      error = Invalid(error_codes::kFailedToParse,
                      "unrecognized field '" + std::string(key) + "' in $readPreference");
    }
  });
  if (error) return *error;
  if (!mode_name) return Invalid(error_codes::kFailedToParse, "$readPreference has no mode");
  std::optional<Mode> mode = ParseMode(*mode_name);
  if (!mode)
    return Invalid(error_codes::kFailedToParse, "Could not parse $readPreference mode '" + *mode_name +
                                                    "': expected primary, primaryPreferred, secondary, "
                                                    "secondaryPreferred or nearest");
  out.mode = *mode;
  if (out.is_primary()) {
    if (has_tags)
      return Invalid(error_codes::kBadValue, "Only empty tags are allowed with primary read preference");
    if (out.max_staleness)
      return Invalid(error_codes::kBadValue, "mode primary cannot be combined with maxStalenessSeconds");
    if (out.hedge)
      return Invalid(error_codes::kBadValue, "read preference mode primary cannot be combined with hedging");
  }
  if (out.max_staleness) {
    const int64_t floor = std::max<int64_t>(
        kSmallestMaxStalenessSeconds,
        (heartbeat.count() + 999) / 1000 + kIdleWritePeriodSeconds);
    if (out.max_staleness->count() < floor)
      return Invalid(kMaxStalenessOutOfRange, "maxStalenessSeconds value can not be less than " +
                                                  std::to_string(floor));
  }
  return out;
}

int64_t EstimatedStalenessMs(const TopologyView& view, const Member& member) {
  if (member.kind != MemberKind::kSecondary) return 0;
  const int64_t heartbeat_ms = view.heartbeat.count();
  if (const Member* primary = view.primary()) {
    // (S.lastUpdateTime - S.lastWriteDate) - (P.lastUpdateTime - P.lastWriteDate) + heartbeat
    const int64_t secondary_lag = member.last_update_us / 1000 - member.last_write_ms;
    const int64_t primary_lag = primary->last_update_us / 1000 - primary->last_write_ms;
    return std::max<int64_t>(0, secondary_lag - primary_lag + heartbeat_ms);
  }
  // No primary: against the freshest secondary.
  int64_t freshest = member.last_write_ms;
  for (const Member& other : view.members)
    if (other.kind == MemberKind::kSecondary) freshest = std::max(freshest, other.last_write_ms);
  return freshest - member.last_write_ms + heartbeat_ms;
}

const Member* SelectForRead(const TopologyView& view, const ReadPreference& preference,
                            uint32_t random) {
  switch (view.kind) {
    case TopologyKind::kSingle:
      return TheSingleServer(view);
    case TopologyKind::kSharded:
      return PickNearest(OfKind(view, MemberKind::kMongos), random);
    case TopologyKind::kReplicaSetNoPrimary:
    case TopologyKind::kReplicaSetWithPrimary:
      return SelectInReplicaSet(view, preference, random);
    case TopologyKind::kUnknown:
      return nullptr;
  }
  return nullptr;
}

const Member* SelectForWrite(const TopologyView& view, uint32_t random) {
  return SelectForRead(view, ReadPreference{}, random);
}

}  // namespace remold
