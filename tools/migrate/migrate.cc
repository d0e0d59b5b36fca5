#include "tools/migrate/migrate.h"

#include <optional>
#include <ostream>

#include "ruleset/migrations.h"
#include "tools/common/tool_run.h"
#include "tools/migrate/collection_migration.h"
#include "tools/migrate/document_migration.h"
#include "tools/migrate/migration_request.h"
#include "tools/migrate/plan_migration.h"
#include "tools/migrate/value_fill.h"

namespace remold {
namespace {

struct Options {
  std::vector<std::string> config_args;  // --config, --backend, --rules, for LoadServeConfig
  std::string rule;
  std::string layer;  // --layer: which rule of a stack
  MigrationDirection direction = MigrationDirection::kToRule;
  PassOptions pass;
  bool throttled = false;  // --batch or --max-rate given
  bool rules_given = false;  // --rules given (not the configuration's directory)
  bool help = false;
};

int64_t PositiveInteger(const std::string& flag, const std::string& text) {
  size_t used = 0;
  long long value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || value <= 0) throw UsageError(flag + ": expected a positive integer, got '" + text + "'");
  return value;
}

double PositiveRate(const std::string& text) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || !(value > 0))
    throw UsageError("--max-rate: expected documents per second (a positive number), got '" + text + "'");
  return value;
}

Options ParseOptions(const std::vector<std::string>& args) {
  Options options;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw UsageError(arg + ": expected a value (see remold migrate --help)");
      return args[++i];
    };
    if (arg == "--help" || arg == "-h") {
      options.help = true;
    } else if (arg == "--dry-run") {
      options.pass.dry_run = true;
    } else if (arg == "--rule") {
      options.rule = value();
    } else if (arg == "--layer") {
      options.layer = value();
    } else if (arg == "--to") {
      const std::string& to = value();
      if (to != "flat") throw UsageError("--to: expected 'flat', got '" + to + "'");
      options.direction = MigrationDirection::kToFlat;
    } else if (arg == "--batch") {
      options.pass.batch = PositiveInteger(arg, value());
      options.throttled = true;
    } else if (arg == "--max-rate") {
      options.pass.max_rate = PositiveRate(value());
      options.throttled = true;
    } else if (arg == "--config" || arg == "--backend" || arg == "--rules") {
      options.rules_given |= arg == "--rules";
      options.config_args.push_back(arg);
      options.config_args.push_back(value());
    } else {
      throw UsageError("unknown argument '" + arg + "' (see remold migrate --help)");
    }
  }
  if (!options.help && options.rule.empty()) throw UsageError("--rule NAME: required (the rule file's stem)");
  return options;
}

// The rules remold migrate can move, as "name (pattern)", for messages.
std::string MigratableRules(const RuleSet& rules) {
  std::string names;
  for (const Rule& rule : rules.rules()) {
    const bool migratable = std::visit(
        [](const auto& p) {
          using R = std::decay_t<decltype(p)>;
          return DocumentMigration<R> || ValueMigration<R> || CollectionMigration<R> || PlanMigration<R>;
        },
        rule.pattern);
    if (migratable) names += (names.empty() ? "" : ", ") + rule.name;
  }
  return names.empty() ? "none" : names;
}

std::string MigratablePatterns() {
  std::string names;
  ForEachPatternType([&]<typename R>() {
    if constexpr (DocumentMigration<R> || ValueMigration<R> || CollectionMigration<R> || PlanMigration<R>)
      names += (names.empty() ? "" : ", ") + std::string(R::kName);
  });
  return names;
}

// The converter of a rule whose pattern converts documents in place, or a
// UsageError when the rule's writes would undo the direction asked.
template <typename R>
DocumentConverter ConverterFor(const Rule& rule, const R& pattern, MigrationDirection direction, bool dry_run,
                               std::string& note) {
  const std::string source_filter = DocumentsToMigrate(pattern, direction);
  if (source_filter.empty())
    throw UsageError("rule '" + rule.name + "' is " + ARuleOf(R::kName) + ", whose documents " +
                     "only move forward: there is no form to migrate them back to");
  const std::optional<MigrationDirection> stored = MigratingTo(pattern);
  const bool to_flat = direction == MigrationDirection::kToFlat;
  if (stored && *stored != direction && !dry_run)
    throw UsageError("rule '" + rule.name + "' says `migrating: " + (to_flat ? "true" : "to_flat") +
                     "`: writes through remold store the other form. Set `migrating: " +
                     (to_flat ? "to_flat" : "true") + "` in " + rule.source +
                     ", let remold reload it, then run this again");
  if (!stored && to_flat && !dry_run)
    throw UsageError("rule '" + rule.name + "' is not migrating: reads through remold would miss "
                     "every document moved back to the flat form. Set `migrating: to_flat` in " +
                     rule.source + ", let remold reload it, then run this again");
  if (!stored)
    note = "migrate: note: rule '" + rule.name + "' is not migrating: until a document is converted, "
           "reads through remold do not see it in the rule's form (set `migrating: true` in " +
           rule.source + " for reads that cover both forms)\n";
  std::string error;
  std::optional<Doc> source = Doc::FromJson(source_filter, &error);
  if (!source) throw std::logic_error("rule '" + rule.name + "': bad migration filter: " + error);
  const MigrationWords words = WordsOf(pattern, direction);
  return DocumentConverter{*source,
                           [pattern, direction](const Doc& document, std::string* why) {
                             return MigratedDocument(pattern, document.get(), direction, why);
                           },
                           words.source_form, words.when_done};
}

// `convert`, for documents stored through `lower` (a stack's lower layer):
// each stored document is read as the lower rule's reads return it,
// converted, and stored again as the lower rule's writes store it.
DocumentConverter::Convert ThroughLayer(const PatternRule& lower, DocumentConverter::Convert convert) {
  return std::visit(
      [&](const auto& below) -> DocumentConverter::Convert {
        using L = std::decay_t<decltype(below)>;
        if constexpr (DocumentMigration<L>) {
          const MigrationDirection stores = MigratingTo(below).value_or(MigrationDirection::kToRule);
          return [below, stores, convert](const Doc& stored, std::string* why) -> std::optional<Doc> {
            std::optional<Doc> read = MigratedDocument(below, stored.get(), MigrationDirection::kToFlat, why);
            if (!read) return std::nullopt;
            std::optional<Doc> converted = convert(*read, why);
            if (!converted) return std::nullopt;
            return MigratedDocument(below, converted->get(), stores, why);
          };
        } else {
          throw UsageError("the layer under it is " + ARuleOf(L::kName) +
                           ", whose documents remold migrate cannot read one by one");
        }
      },
      lower);
}

// Runs the migration of the request's rule, by the migration part its
// pattern has (patterns/migration.h); a UsageError for one without.
int MigrateRule(const MigrationRequest& request) {
  const Rule& rule = request.rule;
  return std::visit(
      [&](const auto& pattern) -> int {
        using R = std::decay_t<decltype(pattern)>;
        if constexpr (ValueMigration<R>) {
          return FillValues(request, R::kName, FillsValuesOnWrite(pattern));
        } else if constexpr (CollectionMigration<R>) {
          const MigrationDirection direction = request.direction;
          DocumentMover mover{MoveOf(pattern, direction),
                              [pattern, direction](const std::vector<Doc>& batch, std::string_view token) {
                                return MovedDocuments(pattern, direction, batch, token);
                              }};
          return MigrateCollection(request, R::kName, mover);
        } else if constexpr (PlanMigration<R>) {
          const MigrationDirection direction = request.direction;
          if (direction == MigrationDirection::kToFlat && MigratingTo(pattern) != direction && !request.pass.dry_run)
            throw UsageError("rule '" + rule.name + "' is not migrating to flat: writes through remold would "
                             "move documents' overflow aside again. Set `migrating: to_flat` in " + rule.source +
                             ", let remold reload it, then run this again");
          return MigrateByPlans(request, R::kName, DocumentsToMigrate(pattern, direction),
                                [pattern, direction, name = rule.name] { return MigrationRound(pattern, direction, name); });
        } else if constexpr (DocumentMigration<R>) {
          std::string note;
          DocumentConverter converter = ConverterFor(rule, pattern, request.direction, request.pass.dry_run, note);
          if (request.stored_by) converter.convert = ThroughLayer(*request.stored_by, std::move(converter.convert));
          return MigrateDocuments(request, converter, note);
        } else {
          throw UsageError("rule '" + rule.name + "' is " + ARuleOf(R::kName) +
                           "; remold migrate migrates the rules of these patterns only: " +
                           MigratablePatterns() + ". For this rule: " + pattern.OnAddition());
        }
      },
      rule.pattern);
}

}  // namespace

std::string MigrateUsage() {
  return "usage: remold migrate (--config FILE | --backend URI --rules DIR) --rule NAME\n"
         "                      [--layer PATTERN] [--to flat] [--dry-run] [--batch N] [--max-rate DOCS/S]\n"
         "\n"
         "Brings the data of a rule's collection written before the rule into the rule's\n"
         "form, or back with --to flat, while the application runs: attribute rules\n"
         "convert documents in place, bucket rules move readings into buckets, computed\n"
         "rules fill the values they maintain, versioned rules upgrade older documents\n"
         "(forward only), polymorphic rules move a type's documents into the shared\n"
         "collection, outlier rules move long arrays' overflow aside and history rules\n"
         "move arrays' elements to the history collection (or store them whole again).\n"
         "Resumes from the checkpoint in\n"
         "<db>.remold_migrations when interrupted.\n"
         "\n"
         "flags:\n"
         "  --config FILE     the configuration `remold serve` reads (backend, rules)\n"
         "  --backend URI     override the backend of the file\n"
         "  --rules DIR       override the rules directory of the file\n"
         "  --rule NAME       the rule (its file's stem)\n"
         "  --layer PATTERN   for a stack (`pattern: [upper, lower]`), the layer to\n"
         "                    migrate: the lower one converts the stored documents, the\n"
         "                    upper one converts them as read through the lower one\n"
         "  --to flat         back to the form written before the rule (an attribute\n"
         "                    rule must say `migrating: to_flat`; a bucket or polymorphic\n"
         "                    rule must be removed from the directory remold serves\n"
         "                    first)\n"
         "  --dry-run         convert in memory only: report what would change\n"
         "  --batch N         documents per batch (default 500; not for computed rules)\n"
         "  --max-rate N      at most N documents per second (not for computed rules)\n"
         "\n"
         "exit status: 0 nothing left to convert, 1 documents left, 2 error\n";
}

int RunMigrate(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
               bool err_is_terminal) {
  return RunReportingErrors("remold migrate: ", err, [&] {
    Options options = ParseOptions(args);
    if (options.help) {
      out << MigrateUsage();
      return kMigrationDone;
    }
    ToolSetup setup = LoadToolSetup(options.config_args, err);
    const Rule* rule = nullptr;
    for (const Rule& candidate : setup.rules->rules())
      if (candidate.name == options.rule) rule = &candidate;
    if (!rule)
      throw UsageError("no rule named '" + options.rule + "' in " + setup.config.rules_dir +
                       " (rules that can be migrated: " + MigratableRules(*setup.rules) + ")");
    if (!options.layer.empty() && rule->below.empty())
      throw UsageError("--layer: rule '" + rule->name + "' is not a stack (it is a " + rule->pattern_name() +
                       " rule)");
    // A layer of a stack migrates as a rule of its own, through the layer under it.
    std::optional<Rule> layer_rule;
    const PatternRule* stored_by = nullptr;
    if (!rule->below.empty()) {
      const std::vector<const PatternRule*> layers = rule->layers();
      std::string names;
      for (size_t i = 0; i < layers.size(); ++i) {
        const std::string name(PatternName(*layers[i]));
        names += (names.empty() ? "" : " or ") + name;
        if (name != options.layer) continue;
        Rule layer;
        layer.name = rule->name + "/" + name;
        layer.source = rule->source;
        layer.pattern = *layers[i];
        layer_rule = std::move(layer);
        if (i + 1 < layers.size()) stored_by = layers[i + 1];
      }
      if (!layer_rule)
        throw UsageError("rule '" + rule->name + "' is a stack (" + rule->pattern_name() + "): say which " +
                         "layer to migrate with --layer " + names +
                         (options.layer.empty() ? "" : " (not '" + options.layer + "')"));
      rule = &*layer_rule;
    }
    // A rule whose file leaves its adoption to remold serves both forms (or
    // refuses) while documents written before it remain: `remold serve`
    // serves it so until this migration is done (app/adoption.h).
    Rule served = *rule;
    served.pattern = WhileUnconvertedLayer(served.pattern);
    for (PatternRule& below : served.below) below = WhileUnconvertedLayer(below);
    std::optional<PatternRule> served_below;
    if (stored_by) served_below = WhileUnconvertedLayer(*stored_by);
    MigrationRequest request{served, setup.config, options.direction, options.pass, options.throttled,
                             options.rules_given, out, err, err_is_terminal};
    request.stored_by = served_below ? &*served_below : nullptr;
    return MigrateRule(request);
  });
}

}  // namespace remold
