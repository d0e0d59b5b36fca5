// Disagreements (app/sidecars.h): for each collection, whether each sidecar
// reads what the other writes, from the forms their rules serve
// (Rule::Forms), through the phases of a rollout docs/operations.md describes.
#include "app/sidecars.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "app/adoption.h"
#include "tests/unit/rule_texts.h"

namespace remold {
namespace {

const std::string kAttribute = "namespace: shop.items\npattern: attribute\nattribute:\n  fields: [color]\n";

// A sidecar serving these rule files (as counted in form: no data left).
SidecarForms Sidecar(const std::string& name, const std::vector<std::pair<std::string, std::string>>& files) {
  if (files.empty()) return {name, name, {}};
  auto loaded = testing::RulesFromTexts(files);
  std::set<std::string> in_form;
  for (const Rule& rule : loaded->rules())
    for (size_t i = 0; i < rule.layers().size(); ++i) in_form.insert(LayerKey(rule, i));
  return {name, name, FormsOf(ServingRules(*loaded, in_form))};
}

std::vector<std::string> Summary(const std::vector<Disagreement>& found) {
  std::vector<std::string> out;
  for (const Disagreement& d : found) out.push_back(d.ns + ": " + d.reader + " cannot read " + d.writer);
  return out;
}

TEST(Disagreements, NoneBetweenSidecarsWithTheSameRules) {
  EXPECT_TRUE(Disagreements(Sidecar("a", {{"items.yaml", kAttribute}}), {Sidecar("b", {{"items.yaml", kAttribute}})})
                  .empty());
  EXPECT_TRUE(Disagreements(Sidecar("a", {}), {Sidecar("b", {})}).empty());
}

TEST(Disagreements, ARuleOnOneSidecarOnly) {
  // The attribute rule stores pairs the other cannot read; the other
  // writes plain documents the rule does not read (in form: pairs alone).
  EXPECT_EQ(Summary(Disagreements(Sidecar("a", {{"items.yaml", kAttribute}}), {Sidecar("b", {})})),
            (std::vector<std::string>{"shop.items: a cannot read b", "shop.items: b cannot read a"}));
  std::vector<Disagreement> found = Disagreements(Sidecar("b", {}), {Sidecar("a", {{"items.yaml", kAttribute}})});
  ASSERT_EQ(found.size(), 2u);
  EXPECT_TRUE(found[0].this_reads);
  EXPECT_EQ(found[0].writes, "attribute specs {k, v} fields [color]");
}

TEST(Disagreements, TheAttributeRolloutPhasesAgreeStepByStep) {
  const auto none = Sidecar("none", {});
  const auto to_flat = Sidecar("to_flat", {{"items.yaml", kAttribute + "  migrating: to_flat\n"}});
  const auto both = Sidecar("both", {{"items.yaml", kAttribute + "  migrating: true\n"}});
  const auto in_form = Sidecar("in_form", {{"items.yaml", kAttribute}});
  // Each step agrees with the one before it...
  EXPECT_TRUE(Disagreements(none, {to_flat}).empty());
  EXPECT_TRUE(Disagreements(to_flat, {both}).empty());
  EXPECT_TRUE(Disagreements(both, {in_form}).empty());
  // ...and skipping one does not.
  EXPECT_EQ(Summary(Disagreements(none, {both})), (std::vector<std::string>{"shop.items: none cannot read both"}));
  EXPECT_EQ(Summary(Disagreements(to_flat, {in_form})),
            (std::vector<std::string>{"shop.items: in_form cannot read to_flat"}));
}

TEST(Disagreements, ValuesMaintainedByOneSidecarOnly) {
  // Stored as written: a sidecar without the rule reads the documents, but
  // its writes maintain nothing, which the rule cannot read as maintained.
  const std::string comments = "namespace: blog.comments\npattern: computed\ncomputed:\n  aggregates:\n"
                               "    - target: posts\n      link: postId\n      fields:\n        n: count\n";
  EXPECT_EQ(Summary(Disagreements(Sidecar("rule", {{"comments.yaml", comments}}), {Sidecar("none", {})})),
            (std::vector<std::string>{"blog.comments: rule cannot read none"}));
  // While it recomputes what each write touches, it can.
  EXPECT_TRUE(Disagreements(Sidecar("rule", {{"comments.yaml", comments + "  migrating: true\n"}}),
                            {Sidecar("none", {})})
                  .empty());
}

TEST(Disagreements, AVersionOneSidecarDoesNotKnow) {
  const std::string two = "namespace: app.users\npattern: versioned\nversioned:\n  versions:\n    - version: 1\n"
                          "    - version: 2\n      upgrade: [{rename: {from: name, to: fullName}}]\n";
  const std::string three = two + "    - version: 3\n      upgrade: [{remove: age}]\n";
  EXPECT_EQ(Summary(Disagreements(Sidecar("old", {{"users.yaml", two}}), {Sidecar("new", {{"users.yaml", three}})})),
            (std::vector<std::string>{"app.users: old cannot read new"}));
}

}  // namespace
}  // namespace remold
