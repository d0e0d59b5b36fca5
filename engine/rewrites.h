// The rewrite part of every pattern of ruleset/patterns.h: the engine and
// every other user of RewritePattern/ViewStages include this one header.
#pragma once

#include <concepts>
#include <optional>
#include <vector>

#include "patterns/attribute/rewrite.h"
#include "patterns/bucket/rewrite.h"
#include "patterns/computed/rewrite.h"
#include "patterns/extended_reference/rewrite.h"
#include "patterns/history/rewrite.h"
#include "patterns/outlier/rewrite.h"
#include "patterns/polymorphic/rewrite.h"
#include "patterns/subset/rewrite.h"
#include "patterns/versioned/rewrite.h"
#include "rewrite/capabilities.h"
#include "rewrite/command.h"
#include "rewrite/plan.h"
#include "ruleset/patterns.h"
#include "ruleset/rule.h"

namespace remold {

// The rewrite part of patterns/pattern.h.
template <typename R>
concept PatternRewriteType = requires(const Command& command, const RuleContext& rule, const R& pattern,
                                      const Capabilities& caps) {
  { RewritePattern(command, rule, pattern, caps) } -> std::same_as<std::optional<Plan>>;
  { ViewStages(pattern) } -> std::same_as<std::vector<Doc>>;
  { ViewSource(pattern) } -> std::same_as<Namespace>;
  { PassesThrough(pattern, std::string_view()) } -> std::same_as<bool>;
};

template <typename Variant>
inline constexpr bool kEveryPatternRewrite = false;
template <typename... R>
inline constexpr bool kEveryPatternRewrite<std::variant<R...>> = (PatternRewriteType<R> && ...);
static_assert(kEveryPatternRewrite<PatternRule>,
              "every entry of PatternRule has its rewrite part included above");

// The view of `rule`'s pattern (patterns/pattern.h); for a stack, the
// view of each layer from the bottom up.
inline std::vector<Doc> ViewOf(const Rule& rule) {
  std::vector<Doc> stages;
  const std::vector<const PatternRule*> layers = rule.layers();
  for (auto layer = layers.rbegin(); layer != layers.rend(); ++layer)
    for (Doc& stage : std::visit([](const auto& pattern) { return ViewStages(pattern); }, **layer))
      stages.push_back(std::move(stage));
  return stages;
}

// Whether `rule`'s view keeps the stored top-level `field` as it is.
inline bool PassesThroughOf(const Rule& rule, std::string_view field) {
  for (const PatternRule* layer : rule.layers())
    if (!std::visit([&](const auto& pattern) { return PassesThrough(pattern, field); }, *layer))
      return false;
  return true;
}

// A pattern whose rule may refuse every read of its collection for a
// while (patterns/adoption.h: documents written before the rule that its
// reads would miss) says why, after the command's name ("is refused while
// ..."), or nothing:
//   std::optional<std::string> ReadsRefused(const R&, const std::string& rule_name);
template <typename R>
concept MayRefuseReads = requires(const R& pattern, const std::string& name) {
  { ReadsRefused(pattern, name) } -> std::same_as<std::optional<std::string>>;
};

// Why reads of `rule`'s collection are refused now, or nothing: the first
// layer that refuses them.
inline std::optional<std::string> ReadsRefusedOf(const Rule& rule) {
  for (const PatternRule* layer : rule.layers()) {
    std::optional<std::string> why = std::visit(
        [&]<typename R>(const R& pattern) -> std::optional<std::string> {
          if constexpr (MayRefuseReads<R>) return ReadsRefused(pattern, rule.name);
          return std::nullopt;
        },
        *layer);
    if (why) return why;
  }
  return std::nullopt;
}

// A pattern whose view reads a collection besides its source names what
// must exist before a pipeline that writes its output ($out, $merge) reads
// through the view: some engines refuse such a pipeline while a $lookup in
// it names a collection not there yet (DocumentDB: 115), where MongoDB
// reads it as empty. Idempotent commands, run once as a Plan::ensure:
//   std::vector<BackendCommand> ViewPrerequisites(const R&);
template <typename R>
concept HasViewPrerequisites = requires(const R& pattern) {
  { ViewPrerequisites(pattern) } -> std::same_as<std::vector<BackendCommand>>;
};

// What `rule`'s view needs to exist before a pipeline that writes reads it.
inline std::vector<BackendCommand> ViewPrerequisitesOf(const Rule& rule) {
  std::vector<BackendCommand> out;
  for (const PatternRule* layer : rule.layers())
    std::visit(
        [&]<typename R>(const R& pattern) {
          if constexpr (HasViewPrerequisites<R>)
            for (BackendCommand& command : ViewPrerequisites(pattern)) out.push_back(std::move(command));
        },
        *layer);
  return out;
}

// The collection `rule`'s view reads: the bottom layer's.
inline Namespace ViewSourceOf(const Rule& rule) {
  return std::visit([](const auto& pattern) { return ViewSource(pattern); }, *rule.layers().back());
}

}  // namespace remold
