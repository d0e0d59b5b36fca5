#include "app/unconverted_data.h"

#include <set>
#include <string>
#include <variant>

namespace remold {

namespace {

// What identifies a rule's stored form: its collection, pattern and shape.
std::string FormOf(const Rule& rule) {
  return std::visit([&rule](const auto& pattern) {
    return pattern.logical.full() + "|" + std::string(rule.pattern_name()) + "|" + pattern.Describe();
  }, rule.pattern);
}

}  // namespace

std::vector<UnconvertedProbe> UnconvertedProbes(const RuleSet& rules, const RuleSet* before) {
  std::set<std::string> known;
  if (before)
    for (const Rule& rule : before->rules()) known.insert(FormOf(rule));
  std::vector<UnconvertedProbe> probes;
  for (const Rule& rule : rules.rules()) {
    if (known.count(FormOf(rule))) continue;
    std::visit(
        [&](const auto& pattern) {
          const std::string json = pattern.Unconverted();
          if (json.empty()) return;
          std::optional<Doc> filter = Doc::FromJson(json);
          if (!filter) return;  // a pattern's own filter: golden-tested to parse
          probes.push_back(UnconvertedProbe{rule.name, std::string(rule.pattern_name()), pattern.logical,
                                            std::move(*filter), pattern.OnAddition()});
        },
        rule.pattern);
  }
  return probes;
}

std::string DescribeUnconverted(const UnconvertedProbe& probe, int64_t count) {
  const std::string how_many =
      count >= kUnconvertedCountLimit ? "at least " + std::to_string(count) : std::to_string(count);
  return "rule '" + probe.rule + "' (" + probe.pattern + ", " + probe.logical.full() + "): " + how_many +
         " document(s) written before the rule are not in its form: " + probe.consequence;
}

}  // namespace remold
