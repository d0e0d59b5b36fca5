// The optional migration part of a pattern: what `remold migrate` needs to
// move a collection's documents between the form written before the rule
// ("flat") and the rule's stored form, one document at a time. A pattern
// provides it (in its rewrite part, pure) by these overloads for its rule
// type R; the tool finds them with the concept below, and says which rules
// can be migrated from the patterns that satisfy it:
//
//   std::string DocumentsToMigrate(const R&, MigrationDirection);
//       // a filter (Extended JSON) on the rule's collection matching the
//       // documents still in the direction's source form
//   std::optional<Doc> MigratedDocument(const R&, const bson_t* document,
//                                       MigrationDirection, std::string* why);
//       // the document in the direction's target form; nullopt (with why)
//       // when it cannot be converted and is left as it is
//   std::optional<MigrationDirection> MigratingTo(const R&);
//       // set when reads through remold handle both forms now, so that the
//       // documents can move while the application runs: the form writes
//       // through remold store meanwhile
//
// A pattern whose rule form moves no document but keeps values derived from
// other documents (the documents stay as written) migrates by filling
// those values instead; `remold migrate` checks and repairs them round
// after round (the check and repair of `remold reconcile`). It provides:
//
//   bool FillsValuesOnWrite(const R&);
//       // the rule is migrating: each write recomputes the values it
//       // touches rather than adjusting values that may predate the rule
#pragma once

#include <concepts>
#include <optional>
#include <string>

#include "common/doc.h"
#include "patterns/migration_direction.h"

namespace remold {

template <typename R>
concept DocumentMigration = requires(const R& rule, const bson_t* document, std::string* why) {
  { DocumentsToMigrate(rule, MigrationDirection::kToRule) } -> std::same_as<std::string>;
  { MigratedDocument(rule, document, MigrationDirection::kToRule, why) } -> std::same_as<std::optional<Doc>>;
  { MigratingTo(rule) } -> std::same_as<std::optional<MigrationDirection>>;
};

template <typename R>
concept ValueMigration = requires(const R& rule) {
  { FillsValuesOnWrite(rule) } -> std::same_as<bool>;
};

}  // namespace remold
