// `remold migrate --config FILE --rule NAME [--to flat] [--dry-run]
//  [--batch N] [--max-rate DOCS/S]`: brings the documents of a rule's
// collection written before the rule into the rule's stored form, or back
// out of it with --to flat (before the rule is retired or changed).
//
// Online: the application keeps reading and writing through remold; while
// the rule says it is migrating, remold reads and writes both forms (see
// the pattern's `migrating` option). Safe to repeat and to interrupt: each
// document is replaced under a guard that it is unchanged since read, and
// a checkpoint in the backend lets a killed migration resume
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
