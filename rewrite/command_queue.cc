#include "rewrite/command_queue.h"

namespace remold {

void CommandQueue::Push(BackendCommand command, OnReply on_reply) {
  pending_.push_back({std::move(command), std::move(on_reply)});
}

void CommandQueue::Refill() {
  while (pending_.empty() && !phases_.empty()) {
    std::function<void()> phase = std::move(phases_.front());
    phases_.pop_front();
    phase();
  }
}

void CommandQueue::Install(Plan& plan) {
  Refill();
  if (pending_.empty()) return;
  plan.commands.push_back(std::move(pending_.front().command));
  in_flight_ = std::move(pending_.front().on_reply);
  pending_.pop_front();
  auto self = shared_from_this();
  plan.then = [self](std::span<const Doc> replies) { return self->Next(replies); };
}

Step CommandQueue::Next(std::span<const Doc> replies) {
  if (in_flight_ && !replies.empty()) {
    OnReply handler = std::move(in_flight_);
    in_flight_ = nullptr;
    handler(replies.back());
  }
  Refill();
  Step step;
  if (pending_.empty()) return step;
  step.commands.push_back(std::move(pending_.front().command));
  in_flight_ = std::move(pending_.front().on_reply);
  pending_.pop_front();
  auto self = shared_from_this();
  step.then = [self](std::span<const Doc> replies) { return self->Next(replies); };
  return step;
}

}  // namespace remold
