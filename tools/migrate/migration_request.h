// What `remold migrate` was asked, once its command line, configuration
// and rules are read: the rule, the backend, the direction, the batch
// options, and where the report (out) and progress (err) go. Each kind of
// migration runs one: documents converted in place
// (tools/migrate/document_migration.h), documents moved between
// collections (tools/migrate/collection_migration.h), maintained values
// filled (tools/migrate/value_fill.h).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "config/config.h"
#include "patterns/migration_direction.h"
#include "ruleset/rule.h"
#include "tools/migrate/document_pass.h"

namespace remold {

struct MigrationRequest {
  // The rule migrated; for a layer of a stack, that layer alone, named
  // "<rule>/<pattern>" (its own checkpoint).
  const Rule& rule;
  const Config& config;
  MigrationDirection direction = MigrationDirection::kToRule;
  PassOptions pass;
  bool throttled = false;    // --batch or --max-rate given
  bool rules_given = false;  // --rules given: not the configuration's directory
  std::ostream& out;
  std::ostream& err;
  bool err_is_terminal = false;
  // For an upper layer of a stack: the layer that stores its documents
  // (each is read through it, converted, and stored through it again).
  const PatternRule* stored_by = nullptr;

  bool to_rule() const { return direction == MigrationDirection::kToRule; }
};

// Exit statuses: nothing left in the source form; some left.
inline constexpr int kMigrationDone = 0;
inline constexpr int kMigrationLeft = 1;

// "1,520/s" ("-" without time); "6.6 s".
std::string FormatRate(int64_t count, double seconds);
std::string FormatSeconds(double seconds);

}  // namespace remold
