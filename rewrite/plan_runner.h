// PlanRunner: runs a Plan (plan.h) the one way remold runs plans, with no
// I/O of its own: the caller sends each command it is given and hands the
// reply back. The proxy (proxy/session.cc) does that over a backend
// connection; the golden tests do it with recorded replies.
//
//   PlanRunner runner(std::move(plan));
//   while (const BackendCommand* command = runner.Next())
//     runner.Accept(<the backend's reply to *command>);
//   ShapedReply reply = runner.Finish();
//
// The rules:
//  - a reply whose ok is not 1 ends the plan and is the client's reply as it
//    is, unless its command may fail (BackendCommand::may_fail);
//  - for an ordered write (Plan::stop_on_write_errors) a reply that carries
//    writeErrors ends the plan;
//  - a write that conflicted and changed nothing is sent again, up to
//    kWriteConflictResends times (rewrite/write_conflict.h);
//  - when the commands run out, plan.then is asked for the next step, with
//    every reply so far, for as long as a step has a `then`;
//  - at the end, plan.shape turns the replies into the client's reply.
// Plan::ensure is not run here: it is once per process, the caller's state.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "rewrite/plan.h"

namespace remold {

class PlanRunner {
 public:
  explicit PlanRunner(Plan plan);

  // The next command to send, or nullptr when the plan has ended. Valid
  // until the next call of Next or Accept.
  const BackendCommand* Next();

  // The reply to the command Next returned last.
  void Accept(Doc reply);

  // Once Next returned nullptr: the client's reply.
  ShapedReply Finish();

  // True when a backend error ended the plan (Finish returns it as it is).
  bool refused() const { return refusal_.has_value(); }

  // Every command the plan has produced so far, sent or not, in order.
  const std::vector<BackendCommand>& commands() const { return plan_.commands; }
  const Plan& plan() const { return plan_; }

 private:
  Plan plan_;  // its commands grow by each step plan.then returns
  Continuation then_;
  size_t next_ = 0;
  int conflicts_ = 0;  // times the current command was sent again
  bool stopped_ = false;
  std::vector<Doc> replies_;
  std::optional<Doc> refusal_;
};

}  // namespace remold
