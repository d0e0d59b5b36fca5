// A plan's write that conflicted (WriteConflict, 112) and changed nothing
// is sent again (rewrite/write_conflict.h); one of several statements, or
// one inside a client's transaction, never is.
#include <gtest/gtest.h>

#include "rewrite/plan_runner.h"
#include "rewrite/write_conflict.h"

namespace remold {
namespace {

Doc Json(const char* text) { return *Doc::FromJson(text); }

BackendCommand Command(const char* body) {
  BackendCommand command;
  command.body = Json(body);
  return command;
}

const char* kConflict = R"({"ok": 0, "code": 112, "codeName": "WriteConflict", "errmsg": "deadlock detected"})";

TEST(WriteConflictTest, OneStatementThatConflictedIsSentAgain) {
  EXPECT_TRUE(ResendAfterWriteConflict(Command(R"({"update": "c", "updates": [{"q": {}, "u": {}}]})"), Json(kConflict)));
  EXPECT_TRUE(ResendAfterWriteConflict(Command(R"({"findAndModify": "c", "query": {}, "remove": true})"), Json(kConflict)));
  EXPECT_TRUE(ResendAfterWriteConflict(
      Command(R"({"update": "c", "updates": [{"q": {}, "u": {}}]})"),
      Json(R"({"ok": 1, "n": 0, "writeErrors": [{"index": 0, "code": 112, "errmsg": "deadlock detected"}]})")));
}

TEST(WriteConflictTest, NeverWhatMayHaveChangedSomething) {
  // Several statements: the reply does not say which were applied.
  EXPECT_FALSE(ResendAfterWriteConflict(
      Command(R"({"update": "c", "updates": [{"q": {"_id": 1}, "u": {}}, {"q": {"_id": 2}, "u": {}}]})"),
      Json(kConflict)));
  // A statement of a client's transaction: the client retries the transaction.
  EXPECT_FALSE(ResendAfterWriteConflict(
      Command(R"({"update": "c", "updates": [{"q": {}, "u": {}}], "txnNumber": 1, "autocommit": false})"),
      Json(kConflict)));
  // Not a write, another error, a success.
  EXPECT_FALSE(ResendAfterWriteConflict(Command(R"({"find": "c"})"), Json(kConflict)));
  EXPECT_FALSE(ResendAfterWriteConflict(Command(R"({"update": "c", "updates": [{"q": {}, "u": {}}]})"),
                                        Json(R"({"ok": 0, "code": 11000})")));
  EXPECT_FALSE(ResendAfterWriteConflict(Command(R"({"update": "c", "updates": [{"q": {}, "u": {}}]})"),
                                        Json(R"({"ok": 1, "n": 1})")));
}

TEST(WriteConflictTest, TheRunnerSendsItAgainThenGivesUp) {
  Plan plan;
  plan.commands.push_back(Command(R"({"delete": "c", "deletes": [{"q": {"_id": 1}, "limit": 1}]})"));
  plan.shape = [](std::span<const Doc> replies) {
    ShapedReply out;
    out.reply = replies.back();
    return out;
  };
  PlanRunner runner(plan);
  for (int attempt = 0; attempt < 3; ++attempt) {
    ASSERT_NE(runner.Next(), nullptr);
    runner.Accept(Json(kConflict));
  }
  ASSERT_NE(runner.Next(), nullptr);
  runner.Accept(Json(R"({"ok": 1, "n": 1})"));
  EXPECT_EQ(runner.Next(), nullptr);
  EXPECT_EQ(FindInteger(runner.Finish().reply.get(), "n"), 1);

  PlanRunner stubborn(plan);
  int sent = 0;
  while (stubborn.Next()) {
    ++sent;
    stubborn.Accept(Json(kConflict));
  }
  EXPECT_EQ(sent, 1 + kWriteConflictResends);
  EXPECT_TRUE(stubborn.refused());
  EXPECT_EQ(FindInteger(stubborn.Finish().reply.get(), "code"), 112);
}

}  // namespace
}  // namespace remold
