#include "app/unconverted_data.h"

#include <set>
#include <string>
#include <variant>

#include "patterns/migrations.h"

namespace remold {

namespace {

// What identifies the stored form of one layer of a rule: its collection,
// pattern and shape.
std::string FormOf(const PatternRule& layer) {
  return std::visit([](const auto& pattern) {
    return pattern.logical.full() + "|" + std::string(pattern.kName) + "|" + pattern.Describe();
  }, layer);
}

}  // namespace

// A stack's layers are probed one by one: each one's filter reads the
// stored documents (the loader checks that a lower layer stores as
// written the fields the upper one filters on).
std::vector<UnconvertedProbe> UnconvertedProbes(const RuleSet& rules, const RuleSet* before) {
  std::set<std::string> known;
  if (before)
    for (const Rule& rule : before->rules())
      for (const PatternRule* layer : rule.layers()) known.insert(FormOf(*layer));
  std::vector<UnconvertedProbe> probes;
  for (const Rule& rule : rules.rules()) {
    for (const PatternRule* layer : rule.layers()) {
      if (known.count(FormOf(*layer))) continue;
      std::visit(
          [&](const auto& pattern) {
            UnconvertedProbe probe{rule.name, std::string(pattern.kName), pattern.logical, Doc(),
                                   "written before the rule are not in its form", pattern.OnAddition()};
            std::string json = pattern.Unconverted();
            if constexpr (DocumentMigration<std::decay_t<decltype(pattern)>>) {
              if (const std::optional<MigrationDirection> to = MigratingTo(pattern)) {
                const bool back = *to == MigrationDirection::kToFlat;
                const MigrationWords words = WordsOf(pattern, *to);
                json = DocumentsToMigrate(pattern, *to);
                probe.state = words.state;
                probe.consequence = words.while_left + "; `remold migrate --rule " + rule.name +
                                    (rule.below.empty() ? "" : " --layer " + std::string(pattern.kName)) +
                                    (back ? " --to flat" : "") + "` converts them";
              }
            }
            if constexpr (CollectionMigration<std::decay_t<decltype(pattern)>>)
              probe.consequence += "; `remold migrate --rule " + rule.name + "` moves them";
            if (json.empty()) return;
            std::optional<Doc> filter = Doc::FromJson(json);
            if (!filter) return;  // a pattern's own filter: golden-tested to parse
            probe.filter = std::move(*filter);
            probes.push_back(std::move(probe));
          },
          *layer);
    }
  }
  return probes;
}

std::string DescribeUnconverted(const UnconvertedProbe& probe, int64_t count) {
  const std::string how_many =
      count >= kUnconvertedCountLimit ? "at least " + std::to_string(count) : std::to_string(count);
  return "rule '" + probe.rule + "' (" + probe.pattern + ", " + probe.logical.full() + "): " + how_many +
         " document(s) " + probe.state + ": " + probe.consequence;
}

}  // namespace remold
