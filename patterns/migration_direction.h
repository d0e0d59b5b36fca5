// Which way a migration moves a collection's documents (patterns/migration.h);
// also what a rule that is `migrating` stores meanwhile.
#pragma once

namespace remold {

enum class MigrationDirection {
  kToRule,  // flat documents into the rule's form
  kToFlat,  // back, before the rule is retired or changed
};

}  // namespace remold
