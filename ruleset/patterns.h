// The patterns remold applies: the one list that the loader, the engine,
// `remold check`, `remold explain` and the metrics iterate.
//
// A new pattern is a folder patterns/<name>/ (see patterns/pattern.h for
// what it provides), its entry here (include and variant), its include in
// engine/rewrites.h and its add_subdirectory in patterns/CMakeLists.txt.
// Every consumer visits the variant, and both parts of the interface are
// checked for every entry, so a pattern left half-added fails to compile.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <variant>

#include "patterns/attribute/rule.h"
#include "patterns/bucket/rule.h"
#include "patterns/computed/rule.h"
#include "patterns/extended_reference/rule.h"
#include "patterns/history/rule.h"
#include "patterns/outlier/rule.h"
#include "patterns/pattern.h"
#include "patterns/polymorphic/rule.h"
#include "patterns/subset/rule.h"
#include "patterns/versioned/rule.h"

namespace remold {

// In the order error messages name them.
using PatternRule =
    std::variant<BucketRule, AttributeRule, ComputedRule, VersionedRule, SubsetRule, ExtendedReferenceRule,
                 PolymorphicRule, OutlierRule, HistoryRule>;

// The name of `rule`'s pattern: "bucket", "attribute", ...
inline std::string_view PatternName(const PatternRule& rule) {
  return std::visit([](const auto& p) { return p.kName; }, rule);
}

// A pattern's name in a sentence: "extended reference" for kName
// "extended_reference".
inline std::string PatternWords(std::string_view pattern) {
  std::string words(pattern);
  std::replace(words.begin(), words.end(), '_', ' ');
  return words;
}

// The same with its article and "rule": "a bucket rule", "an extended
// reference rule".
inline std::string ARuleOf(std::string_view pattern) {
  const std::string words = PatternWords(pattern);
  const bool vowel = !words.empty() && std::string_view("aeiou").find(words[0]) != std::string_view::npos;
  return (vowel ? "an " : "a ") + words + " rule";
}

// Calls fn.template operator()<R>() for each pattern's rule type R, in the
// order of the list: [&]<typename R>() { ... R::kName ... }.
template <typename Fn>
void ForEachPatternType(Fn&& fn) {
  [&]<typename... R>(std::variant<R...>*) {
    (fn.template operator()<R>(), ...);
  }(static_cast<PatternRule*>(nullptr));
}

template <typename Variant>
inline constexpr bool kEveryPatternRule = false;
template <typename... R>
inline constexpr bool kEveryPatternRule<std::variant<R...>> = ((PatternRuleType<R> && HasStoredForms<R>) && ...);
static_assert(kEveryPatternRule<PatternRule>,
              "every entry of PatternRule provides the rule part of patterns/pattern.h");

}  // namespace remold
