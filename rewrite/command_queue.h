// CommandQueue: a plan whose next backend command depends on the replies
// to the previous ones (read the documents a delete will remove, then
// remove each, then repair what the removal changed, and check again).
//
// Each queued command comes with a handler that receives its reply; a
// handler may queue more commands. When the queue runs dry, `on_empty` is
// called, and may queue the next phase. The queue runs one command per
// Plan step, so a handler always sees the effect of everything before it.
//
// Pure: handlers only read replies and queue commands.
#pragma once

#include <deque>
#include <functional>
#include <memory>

#include "rewrite/plan.h"

namespace remold {

class CommandQueue : public std::enable_shared_from_this<CommandQueue> {
 public:
  using OnReply = std::function<void(const Doc& reply)>;

  void Push(BackendCommand command, OnReply on_reply);
  bool empty() const { return pending_.empty(); }
  // Drops every queued command and phase: the plan ends after this reply.
  void Clear() {
    pending_.clear();
    phases_.clear();
  }

  // Phases run in order: when the queue is empty (at the start, and after
  // a reply was handled), the next phase is called to queue its commands;
  // the plan ends when the queue is empty and no phase is left.
  void AddPhase(std::function<void()> phase) { phases_.push_back(std::move(phase)); }

  // Fills plan.commands and plan.then so that the proxy (or a golden
  // test) runs the queue to its end. The plan keeps the queue alive.
  void Install(Plan& plan);

 private:
  Step Next(std::span<const Doc> replies);
  void Refill();

  struct Pending {
    BackendCommand command;
    OnReply on_reply;
  };
  std::deque<Pending> pending_;
  std::deque<std::function<void()>> phases_;
  OnReply in_flight_;
};

}  // namespace remold
