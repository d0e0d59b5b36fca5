#include "rewrite/plan_runner.h"

#include <utility>

#include "rewrite/write_conflict.h"

namespace remold {
PlanRunner::PlanRunner(Plan plan) : plan_(std::move(plan)), then_(plan_.then) {}

const BackendCommand* PlanRunner::Next() {
  while (!stopped_ && next_ == plan_.commands.size() && then_) {
    Step step = then_(replies_);
    for (BackendCommand& command : step.commands) plan_.commands.push_back(std::move(command));
    then_ = std::move(step.then);
  }
  if (stopped_ || next_ == plan_.commands.size()) return nullptr;
  return &plan_.commands[next_];
}

void PlanRunner::Accept(Doc reply) {
  const BackendCommand& command = plan_.commands[next_];
  if (ResendAfterWriteConflict(command, reply) && conflicts_ < kWriteConflictResends) {
    ++conflicts_;  // Next gives the same command again
    return;
  }
  ++next_;
  conflicts_ = 0;
  if (!IsOkReply(reply) && !command.may_fail) {
    refusal_ = std::move(reply);
    stopped_ = true;
    return;
  }
  if (plan_.stop_on_write_errors && Find(reply.get(), "writeErrors")) stopped_ = true;
  replies_.push_back(std::move(reply));
}

ShapedReply PlanRunner::Finish() {
  if (refusal_) {
    ShapedReply out;
    out.reply = std::move(*refusal_);
    return out;
  }
  return plan_.shape(replies_);
}

}  // namespace remold
