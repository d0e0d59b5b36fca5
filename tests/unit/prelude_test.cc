// AfterPrelude (rewrite/plan.h): a prelude read again while it asks for
// writes, then the plan; and, with `unfinished`, a refusal instead of the
// plan when the rounds run out first.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "rewrite/command.h"
#include "rewrite/plan.h"
#include "rewrite/plan_runner.h"

namespace remold {
namespace {

BackendCommand Named(const std::string& name) {
  BackendCommand command;
  AppendString(command.body.mut(), name, "c");
  return command;
}

Doc Ok() { return *Doc::FromJson(R"({"ok": 1.0})"); }

std::string NameOf(const BackendCommand& command) {
  bson_iter_t it;
  bson_iter_init(&it, command.body.get());
  bson_iter_next(&it);
  return bson_iter_key(&it);
}

Plan Client() {
  Plan plan;
  plan.commands.push_back(Named("client"));
  plan.shape = [](std::span<const Doc> replies) { return ShapedReply{replies.back(), {}, {}, {}, {}, {}}; };
  return plan;
}

// Runs `plan`, answering ok to everything; the commands sent, by name.
std::vector<std::string> Sent(Plan plan, ShapedReply& reply) {
  PlanRunner runner(std::move(plan));
  std::vector<std::string> sent;
  while (const BackendCommand* command = runner.Next()) {
    sent.push_back(NameOf(*command));
    runner.Accept(Ok());
  }
  reply = runner.Finish();
  return sent;
}

TEST(AfterPrelude, ReadsAgainWhileItAsksForWritesThenRunsThePlan) {
  int reads = 0;
  PreludeWrites writes = [&](const Doc&) {
    return ++reads < 3 ? std::vector<BackendCommand>{Named("write")} : std::vector<BackendCommand>{};
  };
  ShapedReply reply;
  EXPECT_EQ(Sent(AfterPrelude(Named("read"), writes, Client(), 5), reply),
            (std::vector<std::string>{"read", "write", "read", "write", "read", "client"}));
  EXPECT_EQ(reply.reply, Ok());
}

TEST(AfterPrelude, RoundsRunOutIntoThePlanOrIntoTheRefusal) {
  PreludeWrites always = [](const Doc&) { return std::vector<BackendCommand>{Named("write")}; };
  ShapedReply reply;
  EXPECT_EQ(Sent(AfterPrelude(Named("read"), always, Client(), 2), reply),
            (std::vector<std::string>{"read", "write", "read", "write", "client"}));
  const Doc refusal = ErrorReply(error_codes::kInvalidOptions, "too many left");
  EXPECT_EQ(Sent(AfterPrelude(Named("read"), always, Client(), 2, refusal), reply),
            (std::vector<std::string>{"read", "write", "read", "write"}));
  EXPECT_EQ(reply.reply, refusal);
}

}  // namespace
}  // namespace remold
