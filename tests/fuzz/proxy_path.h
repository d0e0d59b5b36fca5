// One client command through the rewrite engine, the way the proxy takes
// it (proxy/session.cc): the command document as an OP_MSG, decoded by
// DecodeRequest, turned into a Command by CommandForRules, rewritten by
// Rewrite, and the plan run by PlanRunner with replies from a ReplyFeed.
// Every command the plan sends and every reply it gives is checked
// (tests/fuzz/plan_checks.h); a plan that does not end within kMaxCommands
// commands fails too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "rewrite/capabilities.h"
#include "ruleset/rule_set.h"
#include "tests/fuzz/reply_feed.h"

namespace remold::fuzz {

inline constexpr size_t kMaxCommands = 100'000;

struct ClientCommand {
  std::span<const uint8_t> body;  // the command document as the client sends it
  // Send an insert's documents, an update's updates or a delete's deletes
  // as an OP_MSG document sequence, as drivers do (they stay in the body
  // when the field is not an array of documents).
  bool as_sequence = false;
};

// What became of the command (REMOLD_FUZZ_SHOW prints it).
enum class Outcome { kRefusedByCodec, kForwarded, kImmediateReply, kRan };

inline const char* OutcomeName(Outcome outcome) {
  switch (outcome) {
    case Outcome::kRefusedByCodec: return "refused by the wire codec";
    case Outcome::kForwarded: return "forwarded unchanged";
    case Outcome::kImmediateReply: return "answered by remold";
    case Outcome::kRan: return "a plan ran";
  }
  return "?";
}

Outcome RunAsProxy(const ClientCommand& client, const RuleSet& rules, const Capabilities& caps,
                   ReplyFeed& replies);

}  // namespace remold::fuzz
