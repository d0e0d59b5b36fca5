#include "patterns/polymorphic/migration.h"

#include <string>

namespace remold {

CollectionMove MoveOf(const PolymorphicRule& rule, MigrationDirection direction) {
  if (direction == MigrationDirection::kToFlat)
    // Back: a proxy serving the rule may still change the type's documents.
    return {rule.stored, rule.logical, rule.TypeFilter(), true, R"({"_id": 1})", true};
  return {rule.logical, rule.stored, "{}", false, R"({"_id": 1})", true};
}

MovedBatch MovedDocuments(const PolymorphicRule& rule, MigrationDirection direction, const std::vector<Doc>& batch,
                          std::string_view) {
  MovedBatch moved;
  for (size_t i = 0; i < batch.size(); ++i) {
    const bson_t* document = batch[i].get();
    if (!Find(document, "_id")) {
      moved.failed.emplace_back(i, "the document has no _id");
      continue;
    }
    Doc out;
    bson_iter_t it;
    bson_iter_init(&it, document);
    if (direction == MigrationDirection::kToRule) {
      if (Find(document, rule.field)) {
        moved.failed.emplace_back(i, "the document has a field '" + rule.field +
                                         "', the rule's discriminator: rename it, then migrate again");
        continue;
      }
      while (bson_iter_next(&it)) AppendValue(out.mut(), bson_iter_key(&it), it);
      AppendString(out.mut(), rule.field, rule.value);
    } else {
      while (bson_iter_next(&it))
        if (rule.field != bson_iter_key(&it)) AppendValue(out.mut(), bson_iter_key(&it), it);
    }
    // A replacement of the copy (one to one): by _id, and by type in the
    // stored collection, where another type's document may have that _id
    // (the upsert then fails on it, and the source stays).
    Doc q, statement;
    AppendValue(q.mut(), "_id", *Find(document, "_id"));
    if (direction == MigrationDirection::kToRule) AppendString(q.mut(), rule.field, rule.value);
    AppendDoc(statement.mut(), "q", q);
    AppendDoc(statement.mut(), "u", out);
    BSON_APPEND_BOOL(statement.mut(), "upsert", true);
    moved.upserts.push_back(std::move(statement));
    moved.sources.push_back({i});
  }
  return moved;
}

}  // namespace remold
