// The versioned pattern's migration (pure): `remold migrate` stores every
// document of an older version upgraded, one at a time (Upgrade, in
// upgrade.h). Reads through remold always upgrade, so the documents can be
// upgraded while the application runs; there is no way back (--to flat).
#pragma once

#include <optional>
#include <string>

#include "common/doc.h"
#include "patterns/migration.h"
#include "patterns/versioned/rule.h"

namespace remold {

// The migration part of the pattern (patterns/migration.h). Documents to
// migrate are those at an older version; "" for kToFlat.
std::string DocumentsToMigrate(const VersionedRule& rule, MigrationDirection direction);
std::optional<Doc> MigratedDocument(const VersionedRule& rule, const bson_t* document,
                                    MigrationDirection direction, std::string* why);
inline std::optional<MigrationDirection> MigratingTo(const VersionedRule&) { return MigrationDirection::kToRule; }
inline MigrationWords WordsOf(const VersionedRule&, MigrationDirection) {
  return {"an older version",
          "older versions are read no more once no writer stores them: their upgrade steps can then go",
          "are at an older version", "reads upgrade them"};
}

}  // namespace remold
