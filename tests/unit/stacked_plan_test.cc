// StackedPlan (rewrite/stacked_plan.h): each command of the upper plan runs
// as the lower rule's plan for it, whose shaped reply the upper plan sees;
// refusals and failures end the plans as they would alone. And the guards
// a lower rule receives from an upper one (rewrite/unchanged_guard.h).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "rewrite/command.h"
#include "rewrite/plan.h"
#include "rewrite/plan_runner.h"
#include "rewrite/stacked_plan.h"
#include "rewrite/unchanged_guard.h"

namespace remold {
namespace {

BackendCommand Named(const std::string& name) {
  BackendCommand command;
  AppendString(command.body.mut(), name, "c");
  AppendString(command.body.mut(), "$db", "d");
  return command;
}

Doc Reply(const std::string& json) { return *Doc::FromJson(json); }

std::string NameOf(const bson_t* body) {
  bson_iter_t it;
  bson_iter_init(&it, body);
  bson_iter_next(&it);
  return bson_iter_key(&it);
}

// A plan of `names` whose reply lists the replies' "from" values, "+"-joined.
Plan Listing(std::vector<std::string> names, bool may_fail = false) {
  Plan plan;
  for (const std::string& name : names) {
    plan.commands.push_back(Named(name));
    plan.commands.back().may_fail = may_fail;
  }
  plan.shape = [](std::span<const Doc> replies) {
    std::string joined;
    for (const Doc& reply : replies) {
      std::optional<std::string> from = FindString(reply.get(), "from");
      joined += (joined.empty() ? "" : "+") + from.value_or(IsOkReply(reply) ? "?" : "failed");
    }
    ShapedReply out;
    AppendString(out.reply.mut(), "from", joined);
    BSON_APPEND_DOUBLE(out.reply.mut(), "ok", 1.0);
    return out;
  };
  return plan;
}

// Runs `plan`; the backend answers {from: <command name>}, or `failure` to
// the command named `failing`. The commands sent, by name.
std::vector<std::string> Sent(Plan plan, ShapedReply& reply, const std::string& failing = "") {
  PlanRunner runner(std::move(plan));
  std::vector<std::string> sent;
  while (const BackendCommand* command = runner.Next()) {
    const std::string name = NameOf(command->body.get());
    sent.push_back(name);
    runner.Accept(name == failing ? ErrorReply(error_codes::kBadValue, "no")
                                  : Reply(R"({"from": ")" + name + R"(", "ok": 1.0})"));
  }
  reply = runner.Finish();
  return sent;
}

// The lower rule: "read" becomes "lower_read" then "lower_shape"; "refused"
// is answered at once; anything else goes as it is.
std::optional<Plan> Lower(const Command& command) {
  if (command.name == "read") return Listing({"lower_read", "lower_shape"});
  if (command.name == "refused") return ImmediateReply(ErrorReply(error_codes::kInvalidOptions, "refused below"));
  return std::nullopt;
}

TEST(StackedPlan, EachUpperCommandRunsAsTheLowerPlanForIt) {
  ShapedReply reply;
  EXPECT_EQ(Sent(StackedPlan(Listing({"read", "write"}), Lower), reply),
            (std::vector<std::string>{"lower_read", "lower_shape", "write"}));
  EXPECT_EQ(FindString(reply.reply.get(), "from"), "lower_read+lower_shape+write");
}

TEST(StackedPlan, ContinuationsOfTheUpperPlanAreRewrittenToo) {
  Plan upper = Listing({"write"});
  upper.then = [](std::span<const Doc> replies) {
    Step step;
    if (replies.size() == 1) step.commands.push_back(Named("read"));
    return step;
  };
  ShapedReply reply;
  EXPECT_EQ(Sent(StackedPlan(std::move(upper), Lower), reply),
            (std::vector<std::string>{"write", "lower_read", "lower_shape"}));
  EXPECT_EQ(FindString(reply.reply.get(), "from"), "write+lower_read+lower_shape");
}

TEST(StackedPlan, ALowerRefusalEndsTheUpperPlanWithIt) {
  ShapedReply reply;
  EXPECT_EQ(Sent(StackedPlan(Listing({"refused", "write"}), Lower), reply), std::vector<std::string>{});
  EXPECT_EQ(FindString(reply.reply.get(), "errmsg"), "refused below");
}

TEST(StackedPlan, ABackendFailureEndsBothPlansUnlessTheUpperCommandMayFail) {
  ShapedReply reply;
  EXPECT_EQ(Sent(StackedPlan(Listing({"read", "write"}), Lower), reply, "lower_read"),
            std::vector<std::string>{"lower_read"});
  EXPECT_EQ(FindString(reply.reply.get(), "errmsg"), "no");
  EXPECT_EQ(Sent(StackedPlan(Listing({"read", "write"}, /*may_fail=*/true), Lower), reply, "lower_read"),
            (std::vector<std::string>{"lower_read", "write"}));
  EXPECT_EQ(FindString(reply.reply.get(), "from"), "failed+write");
}

TEST(StackedPlan, LowerPrerequisitesKnownFirstAreTheEnsureLaterOnesRunInline) {
  auto lower = [](const Command& command) -> std::optional<Plan> {
    Plan plan = Listing({"lower_" + command.name});
    plan.ensure.push_back(Named("index_" + command.name));
    return plan;
  };
  Plan upper = Listing({"read"});
  upper.then = [](std::span<const Doc> replies) {
    Step step;
    if (replies.size() == 1) step.commands.push_back(Named("write"));
    return step;
  };
  Plan stacked = StackedPlan(std::move(upper), lower);
  ASSERT_EQ(stacked.ensure.size(), 1u);
  EXPECT_EQ(NameOf(stacked.ensure[0].body.get()), "index_read");
  ShapedReply reply;
  EXPECT_EQ(Sent(std::move(stacked), reply, "index_write"),
            (std::vector<std::string>{"lower_read", "index_write", "lower_write"}));
  EXPECT_EQ(FindString(reply.reply.get(), "from"), "lower_read+lower_write");
}

TEST(StackedPlan, LowerCursorsToKillAndWarningsJoinTheUpperReply) {
  auto lower = [](const Command&) -> std::optional<Plan> {
    Plan plan = Listing({"lower"});
    plan.shape = [](std::span<const Doc> replies) {
      ShapedReply out{replies.front(), {42}, "d", "c", {"left to reconcile"}};
      return out;
    };
    return plan;
  };
  ShapedReply reply;
  Sent(StackedPlan(Listing({"read"}), lower), reply);
  EXPECT_EQ(reply.cursors_to_kill, std::vector<int64_t>{42});
  EXPECT_EQ(reply.kill_collection, "c");
  EXPECT_EQ(reply.warnings, std::vector<std::string>{"left to reconcile"});
}

TEST(UnchangedGuard, GuardedDocumentRecognisesExactlyTheGuard) {
  const Doc document = Reply(R"({"_id": 1, "a": "$x", "b": [1, 2]})");
  EXPECT_EQ(GuardedDocument(UnchangedDocument(document).get()), document);
  Doc widened = UnchangedDocument(document);
  BSON_APPEND_INT32(widened.mut(), "c", 1);
  EXPECT_EQ(GuardedDocument(widened.get()), std::nullopt);
  EXPECT_EQ(GuardedDocument(Reply(R"({"_id": 1, "$expr": {"$eq": ["$a", 1]}})").get()), std::nullopt);
}

TEST(UnchangedGuard, UnchangedFieldsComparesEachFieldAndTheirNumber) {
  EXPECT_EQ(UnchangedFields(Reply(R"({"_id": 1, "a": "$x"})")),
            Reply(R"({"_id": 1, "$expr": {"$and": [{"$eq": ["$_id", {"$literal": 1}]},
                      {"$eq": ["$a", {"$literal": "$x"}]},
                      {"$eq": [{"$size": {"$objectToArray": "$$ROOT"}}, 2]}]}})"));
  // A name a path cannot reach: the whole document, in order.
  const Doc dotted = Reply(R"({"_id": 1, "a.b": 2})");
  EXPECT_EQ(UnchangedFields(dotted), UnchangedDocument(dotted));
}

}  // namespace
}  // namespace remold
