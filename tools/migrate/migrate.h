// `remold migrate --config FILE --rule NAME [--to flat] [--dry-run]
//  [--batch N] [--max-rate DOCS/S]`: brings the data of a rule's collection
// written before the rule into the rule's form, or back out of it with
// --to flat (before the rule is retired or changed), by the migration part
// of the rule's pattern (patterns/migration.h):
//   - documents converted in place (attribute: tools/migrate/document_migration.h);
//   - documents moved between collections (bucket: tools/migrate/collection_migration.h);
//   - maintained values filled (computed: tools/migrate/value_fill.h).
//
// Online: the application keeps reading and writing through remold. Safe
// to repeat and to interrupt: every write is guarded or meets a duplicate
// key, and a checkpoint in the backend lets a killed migration resume
// (tools/migrate/checkpoint.h). Report lines go to `out`, progress to `err`
// (a bar when `err_is_terminal`, plain lines otherwise, with rate and ETA).
//
// Exit codes: 0 nothing left in the source form; 1 documents left (they
// cannot be converted, or kept changing); 2 usage, configuration, rules or
// backend errors.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace remold {

int RunMigrate(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
               bool err_is_terminal);

std::string MigrateUsage();

}  // namespace remold
