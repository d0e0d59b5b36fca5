// A delete of one document pinned by _id is sent with limit 0
// (rewrite/one_document_delete.h); every other statement as it is.
#include <gtest/gtest.h>

#include "rewrite/one_document_delete.h"

namespace remold {
namespace {

Doc Json(const char* text) { return *Doc::FromJson(text); }

Command Delete(const char* body) {
  Command command;
  command.body = Json(body);
  return command;
}

const Command kPlainDelete = Delete(R"({"delete": "c", "deletes": []})");

// The limit OneDocumentDelete sends for `statement`, sent as it is.
int64_t SentLimit(const char* statement) {
  const Doc client = Json(statement);
  return FindInteger(OneDocumentDelete(kPlainDelete, client, client).get(), "limit").value_or(-1);
}

TEST(OneDocumentDeleteTest, OneIdIsDeletedWithLimitZero) {
  EXPECT_EQ(SentLimit(R"({"q": {"_id": 7}, "limit": 1})"), 0);
  EXPECT_EQ(SentLimit(R"({"q": {"_id": "a", "price": {"$lt": 3}}, "limit": 1})"), 0);
  EXPECT_EQ(SentLimit(R"({"q": {"_id": {"region": "eu", "n": 1}}, "limit": 1})"), 0);
  EXPECT_EQ(SentLimit(R"({"q": {"_id": null}, "limit": 1})"), 0);
}

TEST(OneDocumentDeleteTest, WhatMayMatchSeveralIsSentAsItIs) {
  EXPECT_EQ(SentLimit(R"({"q": {"_id": {"$in": [1, 2]}}, "limit": 1})"), 1);
  EXPECT_EQ(SentLimit(R"({"q": {"_id": {"$gt": 1}}, "limit": 1})"), 1);
  EXPECT_EQ(SentLimit(R"({"q": {"_id": {"$regex": "^a"}}, "limit": 1})"), 1);
  EXPECT_EQ(SentLimit(R"({"q": {"_id": [1, 2]}, "limit": 1})"), 1);
  EXPECT_EQ(SentLimit(R"({"q": {"price": 3}, "limit": 1})"), 1);
  // A collation of its own may match several _ids the collection's keeps apart.
  EXPECT_EQ(SentLimit(R"({"q": {"_id": "a"}, "limit": 1, "collation": {"locale": "en", "strength": 2}})"), 1);
  EXPECT_EQ(SentLimit(R"({"q": {"_id": 7}, "limit": 0})"), 0);
}

TEST(OneDocumentDeleteTest, ARetryableOrTransactionDeleteKeepsItsLimit) {
  // mongod refuses a retryable delete of limit 0 (72), and a retry must be
  // the statement first sent.
  const Doc statement = Json(R"({"q": {"_id": 7}, "limit": 1})");
  for (const char* body : {R"({"delete": "c", "deletes": [], "lsid": {"id": 1}, "txnNumber": 3})",
                           R"({"delete": "c", "deletes": [], "lsid": {"id": 1}, "txnNumber": 3, "autocommit": false})"}) {
    EXPECT_EQ(FindInteger(OneDocumentDelete(Delete(body), statement, statement).get(), "limit"), 1) << body;
  }
}

TEST(OneDocumentDeleteTest, TheSentStatementKeepsItsFilterAndFields) {
  const Doc client = Json(R"({"q": {"_id": 7}, "limit": 1, "hint": {"_id": 1}})");
  const Doc sent = Json(R"({"q": {"$and": [{"_id": 7}, {"v": {"$ne": 1}}]}, "limit": 1, "hint": {"_id": 1}})");
  EXPECT_EQ(OneDocumentDelete(kPlainDelete, client, sent).ToRelaxedJson(),
            Json(R"({"q": {"$and": [{"_id": 7}, {"v": {"$ne": 1}}]}, "limit": 0, "hint": {"_id": 1}})").ToRelaxedJson());
}

}  // namespace
}  // namespace remold
