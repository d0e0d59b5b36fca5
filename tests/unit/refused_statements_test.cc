// A write of which a rule refuses some statements answers as mongod
// answers statements that fail (rewrite/refused_statements.h): the
// statements that run are re-planned alone, and their reply's indexes are
// the client's again.
#include <gtest/gtest.h>

#include "rewrite/refused_statements.h"

namespace remold {
namespace {

Doc Json(const char* text) {
  std::optional<Doc> doc = Doc::FromJson(text);
  if (!doc) ADD_FAILURE() << "not JSON: " << text;
  return doc ? std::move(*doc) : Doc();
}

Command Update(const char* body) {
  Command command;
  command.name = "update";
  command.db = "shop";
  command.body = Json(body);
  return command;
}

const Refusal kNo{error_codes::kInvalidOptions, "not this one"};

// Plans the statements that run by forwarding them, and records them.
struct Recorder {
  std::vector<std::string> sent;
  std::optional<Plan> operator()(const Command& rest) {
    sent.push_back(FindDocument(rest.body.get(), "updates")->ToRelaxedJson());
    return std::nullopt;
  }
};

Doc Shaped(const Plan& plan, const char* backend_reply) {
  const Doc reply = Json(backend_reply);
  return plan.shape(std::span<const Doc>(&reply, 1)).reply;
}

std::vector<int64_t> ErrorIndexes(const Doc& reply) {
  std::vector<int64_t> out;
  if (auto errors = Find(reply.get(), "writeErrors"))
    for (const Doc& e : ArrayDocuments(*errors)) out.push_back(*FindInteger(e.get(), "index"));
  return out;
}

const char* kThree = R"({"update": "c", "updates": [{"q": {"a": 0}, "u": {"$set": {"x": 1}}},
    {"q": {"a": 1}, "u": {"$set": {"x": 1}}}, {"q": {"a": 2}, "u": {"$set": {"x": 1}}}]})";

TEST(RefusedStatementsTest, OrderedRunsWhatComesBeforeTheRefusalOnly) {
  Recorder recorder;
  Plan plan = WithRefusedStatements(Update(kThree), "updates", {{1, kNo}}, std::ref(recorder));
  ASSERT_EQ(recorder.sent.size(), 1u);
  EXPECT_NE(recorder.sent[0].find("\"a\" : 0"), std::string::npos);
  EXPECT_EQ(recorder.sent[0].find("\"a\" : 2"), std::string::npos);
  const Doc reply = Shaped(plan, R"({"n": 1, "nModified": 1, "ok": 1.0})");
  EXPECT_EQ(ErrorIndexes(reply), std::vector<int64_t>{1});
  EXPECT_EQ(*FindInteger(reply.get(), "n"), 1);
}

TEST(RefusedStatementsTest, OrderedFailureBeforeTheRefusalHidesIt) {
  Recorder recorder;
  Plan plan = WithRefusedStatements(Update(kThree), "updates", {{2, kNo}}, std::ref(recorder));
  const Doc reply = Shaped(plan, R"({"n": 0, "nModified": 0, "ok": 1.0,
      "writeErrors": [{"index": 0, "code": 11000, "errmsg": "dup"}]})");
  EXPECT_EQ(ErrorIndexes(reply), std::vector<int64_t>{0});  // stopped there: statement 2 never reached
}

TEST(RefusedStatementsTest, UnorderedRunsTheRestAndMapsIndexesBack) {
  Recorder recorder;
  Command client = Update(R"({"update": "c", "ordered": false, "updates": [{"q": {"a": 0}, "u": {"$set": {"x": 1}}},
      {"q": {"a": 1}, "u": {"$set": {"x": 1}}}, {"q": {"a": 2}, "u": {"$set": {"x": 1}}, "upsert": true}]})");
  Plan plan = WithRefusedStatements(client, "updates", {{0, kNo}}, std::ref(recorder));
  ASSERT_EQ(recorder.sent.size(), 1u);
  EXPECT_EQ(recorder.sent[0].find("\"a\" : 0"), std::string::npos);
  const Doc reply = Shaped(plan, R"({"n": 2, "nModified": 0, "ok": 1.0,
      "upserted": [{"index": 1, "_id": 9}], "writeErrors": [{"index": 0, "code": 11000, "errmsg": "dup"}]})");
  EXPECT_EQ(ErrorIndexes(reply), (std::vector<int64_t>{0, 1}));  // the refusal at 0, the backend's 0 is the client's 1
  auto upserted = ArrayDocuments(*Find(reply.get(), "upserted"));
  ASSERT_EQ(upserted.size(), 1u);
  EXPECT_EQ(*FindInteger(upserted[0].get(), "index"), 2);
}

TEST(RefusedStatementsTest, EveryStatementRefusedSendsNothing) {
  Recorder recorder;
  Command client = Update(R"({"update": "c", "ordered": false, "updates": [{"q": {}, "u": {"$set": {"x": 1}}}]})");
  Plan plan = WithRefusedStatements(client, "updates", {{0, kNo}}, std::ref(recorder));
  EXPECT_TRUE(recorder.sent.empty());
  ASSERT_TRUE(plan.immediate_reply.has_value());
  EXPECT_EQ(ErrorIndexes(*plan.immediate_reply), std::vector<int64_t>{0});
  EXPECT_EQ(*FindInteger(plan.immediate_reply->get(), "nModified"), 0);
}

TEST(RefusedStatementsTest, InATransactionTheWholeCommandIsRefused) {
  Recorder recorder;
  Command client = Update(R"({"update": "c", "autocommit": false, "txnNumber": 1,
      "updates": [{"q": {}, "u": {"$set": {"x": 1}}}, {"q": {}, "u": {"$set": {"x": 2}}}]})");
  Plan plan = WithRefusedStatements(client, "updates", {{1, kNo}}, std::ref(recorder));
  EXPECT_TRUE(recorder.sent.empty());
  ASSERT_TRUE(plan.immediate_reply.has_value());
  EXPECT_EQ(*FindInteger(plan.immediate_reply->get(), "code"), 72);
}

}  // namespace
}  // namespace remold
