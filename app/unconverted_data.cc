#include "app/unconverted_data.h"

#include <set>
#include <string>
#include <variant>

#include "patterns/adoption.h"
#include "ruleset/migrations.h"

namespace remold {

std::string LayerKey(const Rule& rule, size_t layer) {
  return std::visit([&](const auto& pattern) {
    return rule.name + "#" + std::to_string(layer) + "|" + pattern.logical.full() + "|" +
           std::string(pattern.kName) + "|" + pattern.Describe();
  }, *rule.layers()[layer]);
}

namespace {

// The command that ends the state, quoted: "`remold migrate --rule NAME`".
std::string MigrateCommand(const Rule& rule, std::string_view pattern, bool back) {
  return "`remold migrate --rule " + rule.name + (rule.below.empty() ? "" : " --layer " + std::string(pattern)) +
         (back ? " --to flat" : "") + "`";
}

template <typename R>
void AddProbes(const Rule& rule, size_t layer, const R& pattern, std::vector<UnconvertedProbe>& probes) {
  UnconvertedProbe probe{rule.name,
                         std::string(R::kName),
                         layer,
                         LayerKey(rule, layer),
                         rule.below.empty() ? rule.name : rule.name + "/" + std::string(R::kName),
                         pattern.logical,
                         {},
                         "document(s)",
                         "written before the rule are not in its form",
                         pattern.OnAddition()};
  std::string json = pattern.Unconverted();
  if constexpr (AdoptingRule<R>) {
    if (AdoptionOf(pattern) == Adoption::kAuto) {
      probe.decides = true;
      probe.consequence = ServingWhileUnconverted(pattern, MigrateCommand(rule, R::kName, false));
    }
  }
  if constexpr (DocumentMigration<R>) {
    if (const std::optional<MigrationDirection> to = MigratingTo(pattern)) {
      const MigrationWords words = WordsOf(pattern, *to);
      json = DocumentsToMigrate(pattern, *to);
      probe.state = words.state;
      probe.consequence = words.while_left + "; " +
                          MigrateCommand(rule, R::kName, *to == MigrationDirection::kToFlat) + " converts them";
    }
  }
  if constexpr (CollectionMigration<R>)
    if (!probe.decides) probe.consequence += "; " + MigrateCommand(rule, R::kName, false) + " moves them";
  if constexpr (UnconvertedElsewhere<R>) {
    for (UnconvertedPipeline& pipeline : UnconvertedPipelines(pattern)) {
      UnconvertedProbe elsewhere = probe;
      elsewhere.ns = pipeline.ns;
      elsewhere.stages = std::move(pipeline.stages);
      elsewhere.what = pipeline.what;
      elsewhere.state = "";
      probes.push_back(std::move(elsewhere));
    }
  }
  if (json.empty()) return;
  std::optional<Doc> filter = Doc::FromJson(json);
  if (!filter) return;  // a pattern's own filter: golden-tested to parse
  Doc match;
  AppendDoc(match.mut(), "$match", *filter);
  probe.stages.push_back(std::move(match));
  probes.push_back(std::move(probe));
}

}  // namespace

// A stack's layers are probed one by one: each one's filter reads the
// stored documents (the loader checks that a lower layer stores as
// written the fields the upper one filters on).
std::vector<UnconvertedProbe> UnconvertedProbes(const RuleSet& rules, const RuleSet* before) {
  std::set<std::string> known;
  if (before)
    for (const Rule& rule : before->rules())
      for (size_t layer = 0; layer < rule.layers().size(); ++layer) known.insert(LayerKey(rule, layer));
  std::vector<UnconvertedProbe> probes;
  for (const Rule& rule : rules.rules()) {
    const std::vector<const PatternRule*> layers = rule.layers();
    for (size_t layer = 0; layer < layers.size(); ++layer) {
      if (known.count(LayerKey(rule, layer))) continue;
      std::visit([&](const auto& pattern) { AddProbes(rule, layer, pattern, probes); }, *layers[layer]);
    }
  }
  return probes;
}

std::string DescribeUnconverted(const UnconvertedProbe& probe, int64_t count) {
  const std::string how_many =
      count >= kUnconvertedCountLimit ? "at least " + std::to_string(count) : std::to_string(count);
  return "rule '" + probe.rule + "' (" + probe.pattern + ", " + probe.ns.full() + "): " + how_many + " " +
         probe.what + (probe.state.empty() ? "" : " " + probe.state) + ": " + probe.consequence;
}

}  // namespace remold
