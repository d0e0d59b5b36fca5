// libFuzzer target of the rewrite engine: one input is a rule set, the
// backend's limits, one client command and the backend's replies
// (tests/fuzz/rewrite_input.h). The command takes the proxy's path through
// the engine (tests/fuzz/proxy_path.h): whatever it is, it is forwarded,
// refused in MongoDB's shape, or rewritten into a plan whose every backend
// command and client reply is valid BSON, and that ends.
//
// The rule sets are the golden cases' (tests/fuzz/rule_sets.h), loaded once.
// REMOLD_FUZZ_SHOW=1 prints what a run does (to read a reproducer):
//   REMOLD_FUZZ_SHOW=1 build-fuzz/fuzz_rewrite CRASH_FILE
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "tests/fuzz/proxy_path.h"
#include "tests/fuzz/reply_feed.h"
#include "tests/fuzz/rewrite_input.h"
#include "tests/fuzz/rule_sets.h"

#ifndef REMOLD_FUZZ_RULE_SETS
#error "REMOLD_FUZZ_RULE_SETS must name tests/fuzz/rewrite_rule_sets.txt"
#endif
#ifndef REMOLD_GOLDEN_CASES
#error "REMOLD_GOLDEN_CASES must name tests/golden/cases"
#endif

namespace {

const std::vector<remold::fuzz::RuleSetEntry>& RuleSets() {
  static const std::vector<remold::fuzz::RuleSetEntry> sets =
      remold::fuzz::LoadRuleSets(REMOLD_FUZZ_RULE_SETS, REMOLD_GOLDEN_CASES);
  return sets;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  RuleSets();  // a list that does not load fails at start, not on the first input
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace remold::fuzz;
  std::optional<RewriteInput> input = ReadRewriteInput({data, size});
  if (!input) return 0;
  const RuleSetEntry& rules = RuleSets()[input->rule_set % RuleSets().size()];
  static const bool show = std::getenv("REMOLD_FUZZ_SHOW") != nullptr;
  if (show) std::fprintf(stderr, "rule set: %s\n", rules.folder.c_str());
  ReplyFeed replies(std::move(input->replies), show);
  Outcome outcome = RunAsProxy({input->command, input->as_sequence}, *rules.rules, input->caps, replies);
  if (show) std::fprintf(stderr, "outcome: %s\n", OutcomeName(outcome));
  return 0;
}
