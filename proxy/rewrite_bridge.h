// Between the wire and the rewrite engine: turning a decoded request into a
// rewrite Command (only when a rule may apply), a Plan's BackendCommand into
// an OP_MSG, and a handshake reply into the backend's Capabilities.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "proxy/wire/request.h"
#include "rewrite/capabilities.h"
#include "rewrite/command.h"
#include "rewrite/plan.h"
#include "ruleset/rule_set.h"

namespace remold {

// The request as a Command if it is an OP_MSG whose namespace has a rule, or
// one that may reach a ruled collection from elsewhere (an aggregate's
// $lookup, a rename: engine/indirect_references.h); nullopt otherwise (the
// fast path: nothing is copied).
std::optional<Command> CommandForRules(const wire::Request& request, const RuleSet& rules);

std::vector<uint8_t> EncodeBackendCommand(const BackendCommand& command, int32_t request_id);

// Reads the limits from a handshake reply document; keeps `caps` values for
// fields the reply lacks.
void UpdateCapabilities(std::span<const uint8_t> handshake_reply, Capabilities& caps);

// The idempotent prerequisite commands (Plan::ensure) that have succeeded in
// this process, shared by every session.
class EnsuredCommands {
 public:
  bool Contains(const std::string& key) const;
  void Add(const std::string& key);
  // Forgets everything: after a drop, an index may be gone and must be
  // ensured again.
  void Clear();

 private:
  mutable std::mutex mutex_;
  std::set<std::string> done_;
};

}  // namespace remold
