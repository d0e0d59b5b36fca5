// The versioned pattern's view (patterns/versioned/view.h) at the loader's
// limits: a version with the most steps of each kind, and computed steps
// at the deepest expressions (`part` nests deepest), give stages nested
// less than the 100 levels MongoDB allows a document. One step or
// expression level past a limit is refused by the loader
// (tests/golden/loader/versioned).
#include <bson/bson.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <variant>
#include <vector>

#include "patterns/versioned/view.h"
#include "ruleset/loader.h"

namespace remold {
namespace {

constexpr int kMongoMaxNesting = 100;

int NestingOf(const bson_t* doc) {
  int deepest = 0;
  bson_iter_t it;
  if (!bson_iter_init(&it, doc)) return 0;
  while (bson_iter_next(&it)) {
    if (!BSON_ITER_HOLDS_DOCUMENT(&it) && !BSON_ITER_HOLDS_ARRAY(&it)) continue;
    uint32_t length = 0;
    const uint8_t* data = nullptr;
    if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
      bson_iter_document(&it, &length, &data);
    } else {
      bson_iter_array(&it, &length, &data);
    }
    bson_t child;
    if (bson_init_static(&child, data, length)) deepest = std::max(deepest, NestingOf(&child));
  }
  return deepest + 1;
}

// A rule whose version 2 repeats `step` (with # replaced by the step's
// index) as many times as the loader allows.
std::string RuleRepeating(const std::string& step) {
  std::string text = "namespace: app.users\npattern: versioned\nversioned:\n  versions:\n"
                     "    - version: 1\n    - version: 2\n      upgrade:\n";
  for (size_t i = 0; i < VersionedRule::kMaxUpgradeSteps; ++i) {
    std::string line = step;
    for (size_t at = line.find('#'); at != std::string::npos; at = line.find('#'))
      line.replace(at, 1, std::to_string(i));
    text += "        - " + line + "\n";
  }
  return text;
}

// `wrap` applied to the field `a` as many times as the loader allows.
template <typename Wrap>
std::string DeepestExpression(Wrap wrap) {
  std::string e = "a";
  for (int level = 0; level < VersionedRule::kMaxUpgradeExpressionDepth; ++level) e = wrap(e);
  return e;
}
std::string Concat(const std::string& e) { return "{concat: [" + e + ", b]}"; }
std::string Part(const std::string& e) { return "{part: {of: " + e + R"(, by: " ", index: -1}})"; }

void ExpectStagesWithinNesting(const std::string& step) {
  RuleLoadResult loaded = LoadRuleText(RuleRepeating(step), "users.yaml");
  ASSERT_TRUE(loaded.errors.empty()) << loaded.errors.front();
  const auto& rule = std::get<VersionedRule>(loaded.rules->rules().front().pattern);
  ASSERT_EQ(rule.versions.back().upgrade.size(), VersionedRule::kMaxUpgradeSteps);
  std::vector<Doc> stages = UpgradeStages(rule);
  ASSERT_EQ(stages.size(), 1u);
  EXPECT_LT(NestingOf(stages.front().get()), kMongoMaxNesting) << step;
}

TEST(VersionedViewDepth, EveryKindOfStepAtTheMostStepsStaysWithinMongoNesting) {
  for (const char* step : {"rename: {from: a#, to: b#}", "default: {field: d#, value: 1}",
                           "convert: {field: c#, to: int}", "move: {fields: [m#], into: sub#}",
                           "move: {fields: [m#], out_of: sub#}", "remove: r#",
                           "compute: {field: x#, expression: {concat: [a, b]}}"})
    ExpectStagesWithinNesting(step);
}

TEST(VersionedViewDepth, TheDeepestExpressionsAtTheMostStepsStayWithinMongoNesting) {
  ExpectStagesWithinNesting("compute: {field: x#, expression: " + DeepestExpression(Concat) + "}");
  ExpectStagesWithinNesting("compute: {field: x#, expression: " + DeepestExpression(Part) + "}");
}

TEST(VersionedViewDepth, OneStepMoreIsRefusedByTheLoader) {
  std::string text = RuleRepeating("remove: r#") + "        - remove: last\n";
  RuleLoadResult loaded = LoadRuleText(text, "users.yaml");
  ASSERT_EQ(loaded.errors.size(), 1u);
  EXPECT_NE(loaded.errors.front().find("at most " + std::to_string(VersionedRule::kMaxUpgradeSteps)),
            std::string::npos);
}

}  // namespace
}  // namespace remold
