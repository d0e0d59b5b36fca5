// The optional migration part of a pattern: what `remold migrate` needs to
// move a collection's documents between the form written before the rule
// ("flat") and the rule's stored form, one document at a time. A pattern
// provides it (in its rewrite part, pure) by these overloads for its rule
// type R; the tool finds them with the concept below, and says which rules
// can be migrated from the patterns that satisfy it:
//
//   std::string DocumentsToMigrate(const R&, MigrationDirection);
//       // a filter (Extended JSON) on the rule's collection matching the
//       // documents still in the direction's source form; "" for a
//       // direction the pattern does not migrate (versions only go up)
//   std::optional<Doc> MigratedDocument(const R&, const bson_t* document,
//                                       MigrationDirection, std::string* why);
//       // the document in the direction's target form; nullopt (with why)
//       // when it cannot be converted and is left as it is
//   std::optional<MigrationDirection> MigratingTo(const R&);
//       // set when reads through remold handle both forms now, so that the
//       // documents can move while the application runs: the form writes
//       // through remold store meanwhile
//   MigrationWords WordsOf(const R&, MigrationDirection);
//       // how the report names the form documents are left in, and what
//       // the operator may do once none is left
//
// A pattern whose rule form moves no document but keeps values derived from
// other documents (the documents stay as written) migrates by filling
// those values instead; `remold migrate` checks and repairs them round
// after round (the check and repair of `remold reconcile`). It provides:
//
//   bool FillsValuesOnWrite(const R&);
//       // the rule is migrating: each write recomputes the values it
//       // touches rather than adjusting values that may predate the rule
//
// A pattern whose rule form lives in another collection, several source
// documents to one (readings in buckets), moves batches between the two
// collections. It provides:
//
//   CollectionMove MoveOf(const R&, MigrationDirection);
//       // the two collections, and which documents of the source to move
//   MovedBatch MovedDocuments(const R&, MigrationDirection,
//                             const std::vector<Doc>& batch, std::string_view token);
//       // the writes storing a batch of source documents (given without
//       // the tool's stamp field) in the destination. Every write inserts:
//       // an insert of a document whose _id is kept from its source, or an
//       // upsert under an _id derived from `token` and the batch, that
//       // matches no existing document; so the same batch written again
//       // under the same token fails with duplicate keys instead of being
//       // stored twice. A move of one document to one (`one_to_one`)
//       // writes each as a replacement upsert of its copy instead, by _id
//       // and what tells its copies from other documents there: written
//       // again, a source that changed since replaces its copy.
//
// A pattern whose stored form spans two collections document by document
// (an outlier's overflow, in pages of another collection) migrates with
// plans of its own rewrite part, round after round until a count finds
// none left. It provides:
//
//   std::string DocumentsToMigrate(const R&, MigrationDirection);
//       // as above: the documents still in the direction's source form
//   Plan MigrationRound(const R&, MigrationDirection, const std::string& rule_name);
//       // one round: a batch of them stored in the direction's form, each
//       // under the guards the rule's own writes use
//   std::optional<MigrationDirection> MigratingTo(const R&);
//       // as above: --to flat needs the rule to say `migrating: to_flat`
#pragma once

#include <concepts>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/doc.h"
#include "patterns/migration_direction.h"
#include "rewrite/plan.h"
#include "rules/namespace.h"

namespace remold {

struct CollectionMove {
  Namespace from;
  Namespace to;
  std::string source;  // filter (Extended JSON) of the documents of `from` to move
  // Documents of `from` may change while they move (each is deleted under
  // a guard that it is as read, and moved again otherwise).
  bool sources_change = false;
  // The order batches are read in (Extended JSON sort, ending with _id):
  // documents that end up together read together.
  std::string order = R"({"_id": 1})";
  // Each source becomes one destination document under the source's _id,
  // written by replacement (above): a source that changed after it was
  // written is written again whole.
  bool one_to_one = false;
};

struct MovedBatch {
  std::vector<Doc> inserts;  // documents of `to`, for an insert command
  std::vector<Doc> upserts;  // or statements ({q, u, upsert}) of an update command
  // Per insert or upsert, in order: the batch indexes of the sources it stores.
  std::vector<std::vector<size_t>> sources;
  // Sources that cannot be moved: batch index, why. They stay where they are.
  std::vector<std::pair<size_t, std::string>> failed;
};

// How `remold migrate`, `remold check` and the start-up warning speak of
// a document migration.
struct MigrationWords {
  std::string source_form;  // "the flat form": where documents are left
  std::string when_done;    // "`migrating: true` can be removed from the rule"
  std::string state;        // of the documents left: "written before the rule are not in its form yet"
  std::string while_left;   // what reads do meanwhile: "the rule is migrating: reads cover both forms"
};

template <typename R>
concept DocumentMigration = requires(const R& rule, const bson_t* document, std::string* why) {
  { DocumentsToMigrate(rule, MigrationDirection::kToRule) } -> std::same_as<std::string>;
  { MigratedDocument(rule, document, MigrationDirection::kToRule, why) } -> std::same_as<std::optional<Doc>>;
  { MigratingTo(rule) } -> std::same_as<std::optional<MigrationDirection>>;
  { WordsOf(rule, MigrationDirection::kToRule) } -> std::same_as<MigrationWords>;
};

template <typename R>
concept PlanMigration = requires(const R& rule, const std::string& name) {
  { DocumentsToMigrate(rule, MigrationDirection::kToRule) } -> std::same_as<std::string>;
  { MigrationRound(rule, MigrationDirection::kToRule, name) } -> std::same_as<Plan>;
  { MigratingTo(rule) } -> std::same_as<std::optional<MigrationDirection>>;
};

template <typename R>
concept ValueMigration = requires(const R& rule) {
  { FillsValuesOnWrite(rule) } -> std::same_as<bool>;
};

template <typename R>
concept CollectionMigration = requires(const R& rule, const std::vector<Doc>& batch) {
  { MoveOf(rule, MigrationDirection::kToRule) } -> std::same_as<CollectionMove>;
  { MovedDocuments(rule, MigrationDirection::kToRule, batch, std::string_view()) } -> std::same_as<MovedBatch>;
};

}  // namespace remold
