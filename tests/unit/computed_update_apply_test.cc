// Unit tests of what an upsert's insert holds, worked out without reading it
// back (patterns/source_writes/update_apply.h): a document another client deletes
// at once is still counted.
#include "patterns/source_writes/update_apply.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace remold {
namespace {

const std::vector<std::string> kInputs = {"_id", "postId", "createdAt", "author"};

Doc Json(const std::string& json) {
  std::optional<Doc> doc = Doc::FromJson(json);
  EXPECT_TRUE(doc) << json;
  return doc ? *doc : Doc();
}

ClientUpdate Update(const std::string& json) {
  Doc u = Json(R"({"u": )" + json + "}");
  bson_iter_t it;
  bson_iter_init_find(&it, u.get(), "u");
  return ClientUpdateOf(it);
}

std::string Inserted(const std::string& query, const std::string& update) {
  Doc id = Json(R"({"_id": 7})");
  bson_iter_t it;
  bson_iter_init_find(&it, id.get(), "_id");
  std::optional<Doc> fields = FieldsOfUpsert(Json(query).get(), Update(update), kInputs, it);
  return fields ? fields->ToRelaxedJson() : "cannot tell";
}

TEST(FieldsOfUpsert, QueryEqualitiesThenOperators) {
  EXPECT_EQ(Inserted(R"({"postId": 1, "author": {"$eq": "ann"}, "text": "x"})",
                     R"({"$set": {"createdAt": 5}})"),
            R"({ "_id" : 7, "postId" : 1, "createdAt" : 5, "author" : "ann" })");  // in `kInputs` order
}

TEST(FieldsOfUpsert, SetOnInsertAppliesAndSetWins) {
  EXPECT_EQ(Inserted(R"({"postId": 1})", R"({"$setOnInsert": {"author": "bob"}, "$set": {"postId": 2}})"),
            R"({ "_id" : 7, "postId" : 2, "author" : "bob" })");
}

TEST(FieldsOfUpsert, RangeConditionsPinNothing) {
  EXPECT_EQ(Inserted(R"({"postId": 1, "createdAt": {"$gt": 3}})", R"({"$inc": {"n": 1}})"),
            R"({ "_id" : 7, "postId" : 1 })");
}

TEST(FieldsOfUpsert, EmbeddedDocumentIsAnEquality) {
  EXPECT_EQ(Inserted(R"({"author": {"name": "ann"}})", R"({"$set": {"postId": 1}})"),
            R"({ "_id" : 7, "postId" : 1, "author" : { "name" : "ann" } })");
}

TEST(FieldsOfUpsert, ReplacementIgnoresTheQuery) {
  EXPECT_EQ(Inserted(R"({"postId": 1})", R"({"postId": 2, "createdAt": 4})"),
            R"({ "postId" : 2, "createdAt" : 4, "_id" : 7 })");
}

TEST(FieldsOfUpsert, EqualitiesUnderAndCount) {
  EXPECT_EQ(Inserted(R"({"$and": [{"postId": 1}, {"$and": [{"author": "a"}]}, {"createdAt": {"$gt": 1}}]})",
                     R"({"$inc": {"n": 1}})"),
            R"({ "_id" : 7, "postId" : 1, "author" : "a" })");
}

TEST(FieldsOfUpsert, TopLevelOperatorsAndPathsCannotBeTold) {
  EXPECT_EQ(Inserted(R"({"$or": [{"postId": 1}]})", R"({"$set": {"author": "a"}})"), "cannot tell");
  EXPECT_EQ(Inserted(R"({"author.name": "ann"})", R"({"$set": {"postId": 1}})"), "cannot tell");
  EXPECT_EQ(Inserted(R"({"postId": 1})", R"({"$push": {"author": "a"}})"), "cannot tell");
}

std::string IdOf(const std::string& query, const std::string& update) {
  std::optional<Doc> id = UpsertIdOf(Json(query).get(), Update(update));
  return id ? id->ToRelaxedJson() : "generated";
}

TEST(UpsertIdOf, FromTheReplacementOrTheQuery) {
  EXPECT_EQ(IdOf(R"({"_id": 1})", R"({"$set": {"a": 1}})"), R"({ "_id" : 1 })");
  EXPECT_EQ(IdOf(R"({"_id": {"$eq": 2}})", R"({"$set": {"a": 1}})"), R"({ "_id" : 2 })");
  EXPECT_EQ(IdOf(R"({"a": 1})", R"({"_id": 3, "a": 1})"), R"({ "_id" : 3 })");
  EXPECT_EQ(IdOf(R"({"$and": [{"_id": 4}, {"_id": {"$type": "int"}}]})", R"({"$set": {"a": 1}})"),
            R"({ "_id" : 4 })");
  EXPECT_EQ(IdOf(R"({"_id": {"$in": [1, 2]}})", R"({"$set": {"a": 1}})"), "generated");
  EXPECT_EQ(IdOf(R"({"a": 1})", R"({"$set": {"a": 1}})"), "generated");
}

}  // namespace
}  // namespace remold
