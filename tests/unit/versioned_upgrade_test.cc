// The versioned pattern's upgrade in C++ (patterns/versioned/upgrade.h):
// each step, field order, documents a step cannot apply to, and versions
// the rule does not know.
#include "patterns/versioned/upgrade.h"

#include <gtest/gtest.h>

#include <string>

#include "patterns/versioned/migration.h"
#include "tests/unit/rule_texts.h"

namespace remold {
namespace {

constexpr const char* kUsers = R"(namespace: app.users
pattern: versioned
versioned:
  versions:
    - version: 1
    - version: 2
      upgrade:
        - compute: {field: first, expression: {part: {of: name, by: " ", index: 0}}}
        - compute: {field: last, expression: {part: {of: name, by: " ", index: -1}}}
        - compute: {field: display, expression: {concat: [last, {literal: ", "}, first]}}
        - remove: name
        - default: {field: country, value: US}
    - version: 3
      upgrade:
        - rename: {from: zip, to: postcode}
        - convert: {field: postcode, to: string}
        - convert: {field: age, to: int}
        - move: {fields: [street, city], into: address}
    - version: 4
      upgrade:
        - move: {fields: [city], out_of: address}
)";

std::shared_ptr<const RuleSet> Users() { return testing::RulesFromTexts({{"users.yaml", kUsers}}); }
const VersionedRule& Rule(const std::shared_ptr<const RuleSet>& rules) {
  return std::get<VersionedRule>(rules->rules().front().pattern);
}
Doc Json(std::string_view json) { return *Doc::FromJson(json); }

std::string Upgraded(std::string_view stored) {
  auto rules = Users();
  return Upgrade(Rule(rules), Json(stored).get()).document.ToRelaxedJson();
}

TEST(VersionedUpgrade, RunsEveryVersionsStepsInOrderKeepingFieldOrder) {
  EXPECT_EQ(Upgraded(R"({"_id": 1, "name": "Ana Maria Rao", "zip": 12345.0, "street": "Main 1", "city": "Oslo", "age": 41.0})"),
            Json(R"({"_id": 1, "postcode": "12345", "age": 41, "first": "Ana", "last": "Rao", "display": "Rao, Ana",
                     "country": "US", "schemaVersion": 4, "city": "Oslo", "address": {"street": "Main 1"}})")
                .ToRelaxedJson());
}

TEST(VersionedUpgrade, RenameKeepsThePlaceAndMoveIntoAnExistingSubdocument) {
  EXPECT_EQ(Upgraded(R"({"_id": 6, "schemaVersion": 2, "first": "Q", "zip": 2.5, "address": {"x": 1}, "street": "t"})"),
            Json(R"({"_id": 6, "schemaVersion": 4, "first": "Q", "postcode": 2.5, "address": {"x": 1, "street": "t"}})")
                .ToRelaxedJson());
}

TEST(VersionedUpgrade, AStepThatCannotApplyLeavesTheDocumentAtItsVersion) {
  auto rules = Users();
  UpgradedDocument numeric_name = Upgrade(Rule(rules), Json(R"({"_id": 4, "name": 42})").get());
  EXPECT_EQ(numeric_name.reached, 1);
  EXPECT_FALSE(numeric_name.changed());
  EXPECT_NE(numeric_name.why.find("not a string"), std::string::npos) << numeric_name.why;
  UpgradedDocument scalar_address =
      Upgrade(Rule(rules), Json(R"({"_id": 5, "schemaVersion": 2, "street": "s", "address": 7})").get());
  EXPECT_EQ(scalar_address.reached, 2);
  EXPECT_NE(scalar_address.why.find("not a document"), std::string::npos) << scalar_address.why;
  std::string why;
  EXPECT_FALSE(MigratedDocument(Rule(rules), Json(R"({"_id": 5, "schemaVersion": 2, "street": "s", "address": 7})").get(),
                                MigrationDirection::kToRule, &why));
  EXPECT_FALSE(why.empty());
}

TEST(VersionedUpgrade, UnknownVersionsAreLeftAsStored) {
  auto rules = Users();
  for (const char* stored : {R"({"_id": 1, "schemaVersion": 9})", R"({"_id": 1, "schemaVersion": "2"})"}) {
    UpgradedDocument out = Upgrade(Rule(rules), Json(stored).get());
    EXPECT_FALSE(out.from) << stored;
    EXPECT_FALSE(out.changed()) << stored;
  }
  EXPECT_EQ(VersionOf(Rule(rules), Json(R"({"schemaVersion": null})").get()), 1);
  EXPECT_EQ(VersionOf(Rule(rules), Json(R"({"schemaVersion": 3.0})").get()), 3);
}

TEST(VersionedUpgrade, ConvertsOnlyValuesThatConvertExactly) {
  EXPECT_EQ(Upgraded(R"({"_id": 1, "schemaVersion": 2, "zip": {"$numberLong": "9007199254740993"}, "age": 3000000000})"),
            Json(R"({"_id": 1, "schemaVersion": 4, "postcode": {"$numberLong": "9007199254740993"}, "age": 3000000000})")
                .ToRelaxedJson());
  EXPECT_EQ(Upgraded(R"({"_id": 1, "schemaVersion": 2, "zip": "A1", "age": "41"})"),
            Json(R"({"_id": 1, "schemaVersion": 4, "postcode": "A1", "age": "41"})").ToRelaxedJson());
}

TEST(VersionedUpgrade, MoveOutOfDropsAnEmptiedSubdocument) {
  EXPECT_EQ(Upgraded(R"({"_id": 1, "schemaVersion": 3, "city": "old", "address": {"city": "Oslo"}, "z": 1})"),
            Json(R"({"_id": 1, "schemaVersion": 4, "city": "Oslo", "z": 1})").ToRelaxedJson());
}

}  // namespace
}  // namespace remold
