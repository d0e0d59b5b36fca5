#include "patterns/versioned/migration.h"

#include "patterns/versioned/upgrade.h"
#include "patterns/versioned/view.h"

namespace remold {

std::string DocumentsToMigrate(const VersionedRule& rule, MigrationDirection direction) {
  return direction == MigrationDirection::kToRule ? OlderVersionsFilter(rule) : "";
}

std::optional<Doc> MigratedDocument(const VersionedRule& rule, const bson_t* document,
                                    MigrationDirection direction, std::string* why) {
  if (direction != MigrationDirection::kToRule) return std::nullopt;
  UpgradedDocument upgraded = Upgrade(rule, document);
  if (upgraded.reached != rule.current()) {
    if (why) *why = upgraded.why.empty() ? "its version is not one of the rule's" : upgraded.why;
    return std::nullopt;
  }
  return std::move(upgraded.document);
}

}  // namespace remold
