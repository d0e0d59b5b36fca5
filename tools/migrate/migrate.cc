#include "tools/migrate/migrate.h"

#include <chrono>
#include <cstdio>
#include <optional>
#include <ostream>

#include "patterns/migrations.h"
#include "tools/common/backend_client.h"
#include "tools/common/progress.h"
#include "tools/common/tool_run.h"
#include "tools/migrate/checkpoint.h"
#include "tools/migrate/document_pass.h"
#include "tools/migrate/move_pass.h"
#include "tools/migrate/value_fill.h"

namespace remold {
namespace {

constexpr int kDone = 0;
constexpr int kLeft = 1;

struct Options {
  std::vector<std::string> config_args;  // --config, --backend, --rules, for LoadServeConfig
  std::string rule;
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
          return DocumentMigration<R> || ValueMigration<R> || CollectionMigration<R>;
        },
        rule.pattern);
    if (migratable) names += (names.empty() ? "" : ", ") + rule.name;
  }
  return names.empty() ? "none" : names;
}

std::string MigratablePatterns() {
  std::string names;
  ForEachPatternType([&]<typename R>() {
    if constexpr (DocumentMigration<R> || ValueMigration<R> || CollectionMigration<R>)
      names += (names.empty() ? "" : ", ") + std::string(R::kName);
  });
  return names;
}

// The converter of `rule`, or a UsageError saying why it has none.
DocumentConverter ConverterFor(const Rule& rule, MigrationDirection direction, bool dry_run, std::string& note) {
  return std::visit(
      [&](const auto& pattern) -> DocumentConverter {
        using R = std::decay_t<decltype(pattern)>;
        if constexpr (!DocumentMigration<R>) {
          throw UsageError("rule '" + rule.name + "' is a " + std::string(R::kName) +
                           " rule; remold migrate moves the documents of these patterns only: " +
                           MigratablePatterns() + ". For this rule: " + pattern.OnAddition());
        } else {
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
          std::optional<Doc> source = Doc::FromJson(DocumentsToMigrate(pattern, direction), &error);
          if (!source) throw std::logic_error("rule '" + rule.name + "': bad migration filter: " + error);
          return DocumentConverter{*source, [pattern, direction](const Doc& document, std::string* why) {
                                     return MigratedDocument(pattern, document.get(), direction, why);
                                   }};
        }
      },
      rule.pattern);
}

// For a rule whose migration fills values (patterns/migration.h): runs it
// and gives its exit status; nullopt for the other rules.
std::optional<int> MigrateValues(const Rule& rule, const Options& options, const Config& config, std::ostream& out,
                                 std::ostream& err, bool err_is_terminal) {
  return std::visit(
      [&](const auto& pattern) -> std::optional<int> {
        using R = std::decay_t<decltype(pattern)>;
        if constexpr (!ValueMigration<R>) {
          return std::nullopt;
        } else {
          if (options.direction == MigrationDirection::kToFlat)
            throw UsageError("rule '" + rule.name + "' is a " + std::string(R::kName) +
                             " rule: its form moves no document (the values it maintains are fields of "
                             "their documents); retired, they stay as they are, no longer maintained. "
                             "There is nothing to migrate back");
          if (options.throttled)
            throw UsageError("--batch and --max-rate apply to rules that move documents; rule '" + rule.name +
                             "' is a " + std::string(R::kName) + " rule, whose values are filled by the passes "
                             "of `remold reconcile --fix`");
          out << "migrate: rule " << rule.name << " (" << R::kName << ", " << rule.logical().full()
              << "): filling the values it maintains" << (options.pass.dry_run ? " (dry run: nothing is written)" : "")
              << "\n";
          if (!FillsValuesOnWrite(pattern))
            out << "migrate: note: rule '" << rule.name << "' is not migrating: until a value is filled, a write "
                << "through remold adjusts the value stored before the rule (set `migrating: true` in " << rule.source
                << " so that writes recompute what they touch)\n";
          std::unique_ptr<BackendClient> backend = ConnectBackend(config, "remold-migrate");
          return FillValues(*backend, rule, options.pass.dry_run, out, err, err_is_terminal);
        }
      },
      rule.pattern);
}

std::string Rate(int64_t count, double seconds) {
  return seconds > 0 ? WithThousands(static_cast<int64_t>(count / seconds)) + "/s" : "-";
}

std::string Elapsed(double seconds) {
  char elapsed[32];
  std::snprintf(elapsed, sizeof elapsed, "%.1f s", seconds);
  return elapsed;
}

// For a rule whose form lives in another collection (patterns/migration.h):
// moves its documents and gives the exit status; nullopt for the others.
std::optional<int> MigrateCollection(const Rule& rule, const Options& options, const ToolSetup& setup,
                                     std::ostream& out, std::ostream& err, bool err_is_terminal) {
  return std::visit(
      [&](const auto& pattern) -> std::optional<int> {
        using R = std::decay_t<decltype(pattern)>;
        if constexpr (!CollectionMigration<R>) {
          return std::nullopt;
        } else {
          const bool to_rule = options.direction == MigrationDirection::kToRule;
          const CollectionMove move = MoveOf(pattern, options.direction);
          if (!to_rule && !options.pass.dry_run && !options.rules_given)
            throw UsageError("rule '" + rule.name + "' is in the rules directory remold serves (" +
                             setup.config.rules_dir + "): reads through it see " + move.from.full() +
                             " only, so documents moved back would vanish from them. Remove the rule file "
                             "from that directory first (remold reloads), then run with --rules DIR naming "
                             "a directory that holds it");
          out << "migrate: rule " << rule.name << " (" << R::kName << ", " << rule.logical().full() << "): "
              << move.from.full() << " into " << move.to.full()
              << (options.pass.dry_run ? " (dry run: nothing is written)" : "") << "\n";
          if (to_rule)
            out << "migrate: note: reads through remold see " << move.to.full()
                << " only: each batch appears in them as it moves\n";
          std::unique_ptr<BackendClient> backend = ConnectBackend(setup.config, "remold-migrate");
          Checkpoint checkpoint = LoadCheckpoint(*backend, rule.name, rule.logical(), options.direction);
          if (checkpoint.resumed)
            out << "migrate: resuming from the checkpoint in " << CheckpointCollection(rule.logical()).full()
                << " (" << WithThousands(checkpoint.converted) << " moved before)\n";
          std::string error;
          const Doc source = *Doc::FromJson(move.source, &error);
          const int64_t total = backend->CountDocuments(move.from, source.get(), kCountAll);
          out << std::flush;
          DocumentMover mover{move, [pattern, direction = options.direction](const std::vector<Doc>& batch,
                                                                             std::string_view token) {
                                return MovedDocuments(pattern, direction, batch, token);
                              }};
          const auto start = std::chrono::steady_clock::now();
          MoveOutcome outcome;
          {
            Progress progress(err, err_is_terminal,
                              {"migrate: rule " + rule.name, move.from.full(),
                               options.pass.dry_run ? "read" : "moved", move.from.collection, true},
                              total);
            outcome = RunMovePass(*backend, checkpoint, mover, options.pass, progress, out);
            progress.Finish();
          }
          const double seconds =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          if (options.pass.dry_run) {
            out << "migrate: dry run: " << WithThousands(outcome.moved) << " document(s) would move into "
                << WithThousands(outcome.written) << " of " << move.to.full() << ", "
                << WithThousands(outcome.failed) << " cannot\n";
            return outcome.failed > 0 ? kLeft : kDone;
          }
          out << "migrate: moved " << WithThousands(outcome.moved) << " document(s) in " << Elapsed(seconds) << " ("
              << Rate(outcome.moved, seconds) << ") into " << WithThousands(outcome.written) << " of "
              << move.to.full() << "; " << WithThousands(outcome.failed) << " cannot be moved; "
              << WithThousands(outcome.left) << " left in " << move.from.full() << "\n";
          if (outcome.left == 0) {
            out << "migrate: done: " << move.from.full() << " is empty"
                << (to_rule ? "" : "; the rule can be deleted") << "\n";
            return kDone;
          }
          out << "migrate: " << WithThousands(outcome.left)
              << " document(s) left: those reported above cannot be moved, or kept changing; run again "
                 "after fixing them\n";
          return kLeft;
        }
      },
      rule.pattern);
}

// Runs the pass from the checkpoint and reports; the exit status.
int Migrate(BackendClient& backend, const Rule& rule, const DocumentConverter& converter, const Options& options,
            std::ostream& out, std::ostream& err, bool err_is_terminal) {
  const Namespace ns = rule.logical();
  const bool to_rule = options.direction == MigrationDirection::kToRule;
  Checkpoint checkpoint = LoadCheckpoint(backend, rule.name, ns, options.direction);
  if (checkpoint.resumed)
    out << "migrate: resuming from the checkpoint in " << CheckpointCollection(ns).full() << " ("
        << WithThousands(checkpoint.converted) << " converted before)\n";
  const int64_t total = backend.CountDocuments(ns, converter.source.get(), kCountAll);
  out << std::flush;
  const auto start = std::chrono::steady_clock::now();
  PassOutcome outcome;
  {
    Progress progress(err, err_is_terminal,
                      {"migrate: rule " + rule.name, ns.full(), options.pass.dry_run ? "read" : "converted",
                       ns.collection, true},
                      total);
    outcome = RunDocumentPass(backend, checkpoint, converter, options.pass, progress, out);
    progress.Finish();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  char elapsed[32];
  std::snprintf(elapsed, sizeof elapsed, "%.1f s", seconds);
  if (options.pass.dry_run) {
    out << "migrate: dry run: " << WithThousands(outcome.converted) << " document(s) would be converted, "
        << WithThousands(outcome.failed) << " cannot be\n";
    return outcome.failed > 0 ? kLeft : kDone;
  }
  out << "migrate: converted " << WithThousands(outcome.converted) << " document(s) in " << elapsed << " ("
      << Rate(outcome.converted, seconds) << "); " << WithThousands(outcome.failed)
      << " cannot be converted; " << WithThousands(outcome.left) << " left in the "
      << (to_rule ? "flat" : "rule's") << " form\n";
  if (outcome.left == 0) {
    out << "migrate: done: every document of " << ns.full() << " is in the "
        << (to_rule ? "rule's form; `migrating: true` can be removed from the rule"
                    : "flat form; the rule can be retired or changed")
        << "\n";
    return kDone;
  }
  out << "migrate: " << WithThousands(outcome.left) << " document(s) left: "
      << (to_rule ? "those reported above cannot be converted, or kept changing; run again after fixing them"
                  : "those reported above cannot be unfolded, or kept changing; run again after fixing them")
      << "\n";
  return kLeft;
}

}  // namespace

std::string MigrateUsage() {
  return "usage: remold migrate --config FILE --rule NAME [--to flat] [--dry-run]\n"
         "                      [--batch N] [--max-rate DOCS/S]\n"
         "\n"
         "Brings the data of a rule's collection written before the rule into the rule's\n"
         "form, or back with --to flat, while the application runs: attribute rules\n"
         "convert documents in place, bucket rules move readings into buckets, computed\n"
         "rules fill the values they maintain. Resumes from the checkpoint in\n"
         "<db>.remold_migrations when interrupted.\n"
         "\n"
         "flags:\n"
         "  --config FILE     the configuration `remold serve` reads (backend, rules)\n"
         "  --backend URI     override the backend of the file\n"
         "  --rules DIR       override the rules directory of the file\n"
         "  --rule NAME       the rule (its file's stem)\n"
         "  --to flat         back to the form written before the rule (an attribute\n"
         "                    rule must say `migrating: to_flat`; a bucket rule must be\n"
         "                    removed from the directory remold serves first)\n"
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
      return kDone;
    }
    ToolSetup setup = LoadToolSetup(options.config_args, err);
    const Rule* rule = nullptr;
    for (const Rule& candidate : setup.rules->rules())
      if (candidate.name == options.rule) rule = &candidate;
    if (!rule)
      throw UsageError("no rule named '" + options.rule + "' in " + setup.config.rules_dir +
                       " (rules that can be migrated: " + MigratableRules(*setup.rules) + ")");
    if (std::optional<int> status = MigrateValues(*rule, options, setup.config, out, err, err_is_terminal))
      return *status;
    if (std::optional<int> status = MigrateCollection(*rule, options, setup, out, err, err_is_terminal))
      return *status;
    const Namespace ns = rule->logical();
    const bool to_rule = options.direction == MigrationDirection::kToRule;
    std::string note;
    DocumentConverter converter = ConverterFor(*rule, options.direction, options.pass.dry_run, note);
    out << "migrate: rule " << rule->name << " (" << rule->pattern_name() << ", " << ns.full() << "): "
        << (to_rule ? "flat documents into the rule's form" : "documents back to the flat form")
        << (options.pass.dry_run ? " (dry run: nothing is written)" : "") << "\n"
        << note;
    std::unique_ptr<BackendClient> backend = ConnectBackend(setup.config, "remold-migrate");
    return Migrate(*backend, *rule, converter, options, out, err, err_is_terminal);
  });
}

}  // namespace remold
