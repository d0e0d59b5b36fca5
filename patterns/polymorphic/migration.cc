#include "patterns/polymorphic/migration.h"

#include <string>

namespace remold {

CollectionMove MoveOf(const PolymorphicRule& rule, MigrationDirection direction) {
  if (direction == MigrationDirection::kToFlat)
    // Back: a proxy serving the rule may still change the type's documents.
    return {rule.stored, rule.logical, rule.TypeFilter(), true};
  return {rule.logical, rule.stored, "{}", false};
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
    moved.inserts.push_back(std::move(out));
    moved.sources.push_back({i});
  }
  return moved;
}

}  // namespace remold
