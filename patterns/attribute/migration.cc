#include "patterns/attribute/migration.h"

#include "patterns/attribute/filter.h"

namespace remold {

std::optional<Doc> ConvertedDocument(const AttributeRule& rule, const bson_t* flat, std::string* why) {
  std::string error;
  Doc converted = FoldAttributes(rule, flat, &error);
  if (!error.empty()) {
    if (why) *why = error;
    return std::nullopt;
  }
  return converted;
}

std::optional<Doc> FlatDocument(const AttributeRule& rule, const bson_t* stored, std::string* why) {
  Doc flat = UnfoldAttributes(rule, stored);
  if (Find(flat.get(), rule.array_field)) {  // unfolding keeps what it cannot unfold
    if (why)
      *why = "its field '" + rule.array_field + "' cannot become fields (an element that is not a {" +
             rule.key_name + ", " + rule.value_name + "} pair, or a name that repeats or is a field already)";
    return std::nullopt;
  }
  return flat;
}

std::string DocumentsToMigrate(const AttributeRule& rule, MigrationDirection direction) {
  if (direction == MigrationDirection::kToRule) return rule.Unconverted();
  return "{" + JsonQuote(rule.array_field) + ": {\"$exists\": true}}";
}

std::optional<Doc> MigratedDocument(const AttributeRule& rule, const bson_t* document,
                                    MigrationDirection direction, std::string* why) {
  return direction == MigrationDirection::kToRule ? ConvertedDocument(rule, document, why)
                                                  : FlatDocument(rule, document, why);
}

}  // namespace remold
