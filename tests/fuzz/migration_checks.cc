#include "tests/fuzz/migration_checks.h"

#include <optional>
#include <string>
#include <vector>

#include "proxy/wire/bson_check.h"
#include "ruleset/migrations.h"
#include "tests/fuzz/fuzz_failure.h"

namespace remold::fuzz {
namespace {

constexpr MigrationDirection kDirections[] = {MigrationDirection::kToRule, MigrationDirection::kToFlat};

void RequireJson(const std::string& text, const char* what) {
  std::string error;
  if (!text.empty() && !Doc::FromJson(text, &error))
    Fail(std::string(what) + " is not Extended JSON: " + error + ": " + text);
}

void RequireValid(const Doc& doc, const char* what) {
  if (std::optional<wire::WireError> error = wire::ValidateDocument(doc.bytes()))
    Fail(std::string(what) + " is not valid BSON: " + error->message);
}

// A document as an application may have written it before the rule.
const Doc& FlatDocument() {
  static const Doc doc = *Doc::FromJson(
      R"({"_id": 1, "a": 1, "t": {"$date": 0}, "specs": [{"k": "x", "v": 1}], "version": 1})");
  return doc;
}

template <typename R>
void CheckLayer(const R& rule) {
  for (MigrationDirection direction : kDirections) {
    if constexpr (DocumentMigration<R>) {
      RequireJson(DocumentsToMigrate(rule, direction), "a filter of documents to migrate");
      std::string why;
      if (std::optional<Doc> migrated = MigratedDocument(rule, FlatDocument().get(), direction, &why))
        RequireValid(*migrated, "a migrated document");
      MigratingTo(rule);
      WordsOf(rule, direction);
    }
    if constexpr (CollectionMigration<R>) {
      CollectionMove move = MoveOf(rule, direction);
      RequireJson(move.source, "the filter of documents to move");
      RequireJson(move.order, "the order of documents to move");
      MovedBatch batch = MovedDocuments(rule, direction, {FlatDocument(), FlatDocument()}, "token");
      for (const Doc& insert : batch.inserts) RequireValid(insert, "a moved document");
      for (const Doc& upsert : batch.upserts) RequireValid(upsert, "an upsert of moved documents");
    }
  }
  if constexpr (ValueMigration<R>) FillsValuesOnWrite(rule);
}

}  // namespace

void CheckMigrations(const Rule& rule) {
  for (const PatternRule* layer : rule.layers())
    std::visit([](const auto& pattern) { CheckLayer(pattern); }, *layer);
}

}  // namespace remold::fuzz
