// The rewrite part of every pattern of patterns/patterns.h: the engine and
// every other user of RewritePattern/ViewStages include this one header.
#pragma once

#include <concepts>
#include <optional>
#include <vector>

#include "patterns/attribute/rewrite.h"
#include "patterns/bucket/rewrite.h"
#include "patterns/computed/rewrite.h"
#include "patterns/patterns.h"
#include "patterns/versioned/rewrite.h"
#include "rewrite/capabilities.h"
#include "rewrite/command.h"
#include "rewrite/plan.h"
#include "rules/rule.h"

namespace remold {

// The rewrite part of patterns/pattern.h.
template <typename R>
concept PatternRewriteType = requires(const Command& command, const Rule& rule, const R& pattern,
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

// The view of `rule`'s pattern (patterns/pattern.h).
inline std::vector<Doc> ViewOf(const Rule& rule) {
  return std::visit([](const auto& pattern) { return ViewStages(pattern); }, rule.pattern);
}

// Whether `rule`'s view keeps the stored top-level `field` as it is.
inline bool PassesThroughOf(const Rule& rule, std::string_view field) {
  return std::visit([&](const auto& pattern) { return PassesThrough(pattern, field); },
                    rule.pattern);
}

// The collection `rule`'s view reads.
inline Namespace ViewSourceOf(const Rule& rule) {
  return std::visit([](const auto& pattern) { return ViewSource(pattern); }, rule.pattern);
}

}  // namespace remold
