#include "rewrite/stacked_plan.h"

#include <memory>
#include <utility>
#include <vector>

#include "rewrite/plan_runner.h"

namespace remold {
namespace {

bool SameCommand(const BackendCommand& a, const BackendCommand& b) {
  return bson_equal(a.body.get(), b.body.get()) && a.sequence_id == b.sequence_id;
}

// The lower plan of one upper command, run to its end.
struct LowerRun {
  std::optional<PlanRunner> runner;  // unset: answered at once
  std::optional<Doc> immediate;
  std::vector<BackendCommand> prerequisites;  // run first, replies ignored
  size_t prerequisites_sent = 0;
};

// The state of a stacked plan's run: the upper plan's runner, the lower
// plan of its current command, and what the lower plans' shapes add.
class StackRun {
 public:
  StackRun(Plan upper, LowerRewrite lower) : upper_(std::move(upper)), lower_(std::move(lower)) {}

  // The lower plans' prerequisites, for the stacked plan's ensure: those
  // of the upper plan's first commands.
  std::vector<BackendCommand> InitialEnsure() {
    for (const BackendCommand& command : upper_.commands()) {
      std::optional<Plan> plan = RewriteLower(command);
      if (!plan) continue;
      for (BackendCommand& ensure : plan->ensure)
        if (!Ensured(ensure)) ensured_.push_back(std::move(ensure));
    }
    return ensured_;
  }

  // The next command to send, or nullopt when both plans have ended.
  // `reply` is the reply to the command returned before (none the first time).
  std::optional<BackendCommand> Advance(const Doc* reply) {
    if (reply) Deliver(*reply);
    while (true) {
      if (current_) {
        if (current_->prerequisites_sent < current_->prerequisites.size()) {
          awaiting_prerequisite_ = true;
          BackendCommand command = current_->prerequisites[current_->prerequisites_sent++];
          command.may_fail = true;
          return command;
        }
        if (current_->runner) {
          if (const BackendCommand* next = current_->runner->Next()) {
            BackendCommand command = *next;
            command.may_fail = true;  // the lower runner decides what a failure ends
            return command;
          }
          ShapedReply shaped = current_->runner->Finish();
          AddExtras(shaped);
          current_.reset();
          upper_.Accept(std::move(shaped.reply));
        } else {
          Doc immediate = std::move(*current_->immediate);
          current_.reset();
          upper_.Accept(std::move(immediate));
        }
      }
      const BackendCommand* next = upper_.Next();
      if (!next) return std::nullopt;
      current_ = Start(*next);
    }
  }

  ShapedReply Finish() {
    ShapedReply out = upper_.Finish();
    if (out.kill_collection.empty() && !kill_collection_.empty()) {
      out.kill_db = kill_db_;
      out.kill_collection = kill_collection_;
    }
    // Cursors of another collection than the upper reply's cannot share
    // its killCursors; the lower rules keep the upper's collection.
    if (out.kill_collection == kill_collection_ && out.kill_db == kill_db_)
      out.cursors_to_kill.insert(out.cursors_to_kill.end(), cursors_.begin(), cursors_.end());
    out.warnings.insert(out.warnings.begin(), warnings_.begin(), warnings_.end());
    out.notices.insert(out.notices.begin(), notices_.begin(), notices_.end());
    return out;
  }

 private:
  std::optional<Plan> RewriteLower(const BackendCommand& command) const {
    std::optional<Command> parsed = CommandFromDocument(FoldedCommand(command));
    if (!parsed) return std::nullopt;
    return lower_(*parsed);
  }

  bool Ensured(const BackendCommand& ensure) const {
    for (const BackendCommand& known : ensured_)
      if (SameCommand(known, ensure)) return true;
    return false;
  }

  LowerRun Start(const BackendCommand& command) {
    LowerRun run;
    std::optional<Plan> plan = RewriteLower(command);
    if (!plan) {  // the lower rule sends it as it is
      Plan as_is;
      as_is.commands.push_back(command);
      as_is.commands.back().may_fail = false;
      as_is.shape = [](std::span<const Doc> replies) {
        ShapedReply out;
        out.reply = replies.front();
        return out;
      };
      run.runner.emplace(std::move(as_is));
      return run;
    }
    if (plan->immediate_reply) {
      run.immediate = std::move(*plan->immediate_reply);
      return run;
    }
    for (BackendCommand& ensure : plan->ensure)
      if (!Ensured(ensure)) run.prerequisites.push_back(std::move(ensure));
    // The upper command's own leniency: a lower plan that fails ends with
    // a reply the upper plan is ready for.
    run.runner.emplace(std::move(*plan));
    return run;
  }

  void Deliver(const Doc& reply) {
    if (!current_) return;
    if (awaiting_prerequisite_) {
      awaiting_prerequisite_ = false;
      return;
    }
    current_->runner->Accept(reply);
  }

  void AddExtras(const ShapedReply& shaped) {
    if (!shaped.cursors_to_kill.empty()) {
      kill_db_ = shaped.kill_db;
      kill_collection_ = shaped.kill_collection;
      cursors_.insert(cursors_.end(), shaped.cursors_to_kill.begin(), shaped.cursors_to_kill.end());
    }
    warnings_.insert(warnings_.end(), shaped.warnings.begin(), shaped.warnings.end());
    notices_.insert(notices_.end(), shaped.notices.begin(), shaped.notices.end());
  }

  PlanRunner upper_;
  LowerRewrite lower_;
  std::vector<BackendCommand> ensured_;
  std::optional<LowerRun> current_;
  bool awaiting_prerequisite_ = false;
  std::vector<int64_t> cursors_;
  std::string kill_db_;
  std::string kill_collection_;
  std::vector<std::string> warnings_;
  std::vector<std::string> notices_;
};

Continuation Following(std::shared_ptr<StackRun> run) {
  return [run](std::span<const Doc> replies) {
    Step step;
    std::optional<BackendCommand> next = run->Advance(replies.empty() ? nullptr : &replies.back());
    if (!next) return step;
    step.commands.push_back(std::move(*next));
    step.then = Following(run);
    return step;
  };
}

}  // namespace

Plan StackedPlan(Plan upper, LowerRewrite lower) {
  if (upper.immediate_reply) return upper;
  Plan stacked;
  stacked.rule = upper.rule;
  stacked.ensure = std::move(upper.ensure);
  auto run = std::make_shared<StackRun>(std::move(upper), std::move(lower));
  for (BackendCommand& ensure : run->InitialEnsure()) stacked.ensure.push_back(std::move(ensure));
  if (std::optional<BackendCommand> first = run->Advance(nullptr)) {
    stacked.commands.push_back(std::move(*first));
    stacked.then = Following(run);
  }
  stacked.shape = [run](std::span<const Doc>) { return run->Finish(); };
  return stacked;
}

}  // namespace remold
