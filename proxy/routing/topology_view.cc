#include "proxy/routing/topology_view.h"

namespace remold {

std::string_view TopologyKindName(TopologyKind kind) {
  switch (kind) {
    case TopologyKind::kUnknown: return "Unknown";
    case TopologyKind::kSingle: return "Single";
    case TopologyKind::kReplicaSetNoPrimary: return "ReplicaSetNoPrimary";
    case TopologyKind::kReplicaSetWithPrimary: return "ReplicaSetWithPrimary";
    case TopologyKind::kSharded: return "Sharded";
  }
  return "Unknown";
}

std::string_view MemberKindName(MemberKind kind) {
  switch (kind) {
    case MemberKind::kUnknown: return "unknown";
    case MemberKind::kStandalone: return "standalone";
    case MemberKind::kMongos: return "mongos";
    case MemberKind::kPrimary: return "primary";
    case MemberKind::kSecondary: return "secondary";
    case MemberKind::kOther: return "other";
  }
  return "unknown";
}

const Member* TopologyView::primary() const {
  for (const Member& member : members)
    if (member.kind == MemberKind::kPrimary) return &member;
  return nullptr;
}

const Member* TopologyView::Find(std::string_view address) const {
  for (const Member& member : members)
    if (member.address == address) return &member;
  return nullptr;
}

}  // namespace remold
