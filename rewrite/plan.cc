#include "rewrite/plan.h"

#include <algorithm>
#include <memory>

namespace remold {

bool IsOkReply(const Doc& reply) {
  auto ok = Find(reply.get(), "ok");
  return ok && bson_iter_as_double(&*ok) == 1.0;
}

Plan ImmediateReply(Doc reply) {
  Plan plan;
  plan.immediate_reply = std::move(reply);
  return plan;
}

Plan Forwarded(BackendCommand command) {
  Plan plan;
  plan.commands.push_back(std::move(command));
  plan.shape = [](std::span<const Doc> replies) { return ShapedReply{replies.front(), {}, {}, {}, {}, {}}; };
  return plan;
}

Doc FoldedCommand(const BackendCommand& command) {
  if (command.sequence_id.empty()) return command.body;
  Doc shown;
  bson_iter_t it;
  bson_iter_init(&it, command.body.get());
  bool placed = false;
  while (bson_iter_next(&it)) {
    std::string_view key = bson_iter_key(&it);
    if (key == "$db" && !placed) {
      AppendArray(shown.mut(), command.sequence_id, command.sequence);
      placed = true;
    }
    AppendValue(shown.mut(), key, it);
  }
  if (!placed) AppendArray(shown.mut(), command.sequence_id, command.sequence);
  return shown;
}

BackendCommand KillCursorsCommand(const ShapedReply& shaped) {
  BackendCommand kill;
  AppendString(kill.body.mut(), "killCursors", shaped.kill_collection);
  bson_t ids;
  BSON_APPEND_ARRAY_BEGIN(kill.body.mut(), "cursors", &ids);
  for (size_t i = 0; i < shaped.cursors_to_kill.size(); ++i)
    BSON_APPEND_INT64(&ids, std::to_string(i).c_str(), shaped.cursors_to_kill[i]);
  bson_append_array_end(kill.body.mut(), &ids);
  AppendString(kill.body.mut(), "$db", shaped.kill_db);
  return kill;
}

namespace {

// A continuation of the inner plan of AfterPrelude: called with every reply
// so far, it hands on those after the prelude's.
struct AfterOffset {
  Continuation inner;
  std::shared_ptr<size_t> offset;
  Step operator()(std::span<const Doc> replies) const {
    Step step = inner(replies.subspan(*offset));
    if (step.then) step.then = AfterOffset{std::move(step.then), offset};
    return step;
  }
};

// The prelude's rounds: `first`, then its writes, then (repeating) `first`
// again, until a read asks for no writes or the rounds run out; then the
// inner plan.
struct PreludeRound {
  BackendCommand first;
  PreludeWrites next;
  Continuation start_inner;
  int rounds_left;
  std::shared_ptr<bool> unfinished;  // set when the rounds ran out, for a refusal
  Step operator()(std::span<const Doc> replies) const {
    std::vector<BackendCommand> writes = next(replies.back());
    if (writes.empty()) return start_inner(replies);
    if (rounds_left <= 1) {
      if (!unfinished) return Step{std::move(writes), start_inner};
      *unfinished = true;
      return Step{std::move(writes), {}};
    }
    PreludeRound again{first, next, start_inner, rounds_left - 1, unfinished};
    Continuation read_again = [first = first, again](std::span<const Doc>) {
      return Step{{first}, again};
    };
    return Step{std::move(writes), read_again};
  }
};

}  // namespace

Plan AfterPrelude(BackendCommand first, PreludeWrites next, Plan plan, int rounds, std::optional<Doc> unfinished) {
  if (plan.immediate_reply) return plan;
  auto inner = std::make_shared<Plan>(std::move(plan));
  auto offset = std::make_shared<size_t>(0);
  Plan out;
  out.rule = inner->rule;
  out.ensure = inner->ensure;
  out.stop_on_write_errors = inner->stop_on_write_errors;
  out.commands.push_back(first);
  Continuation start_inner = [inner, offset](std::span<const Doc> replies) {
    *offset = replies.size();
    Step step{inner->commands, {}};
    if (inner->then) step.then = AfterOffset{inner->then, offset};
    return step;
  };
  auto ran_out = unfinished ? std::make_shared<bool>(false) : nullptr;
  out.then = PreludeRound{std::move(first), std::move(next), std::move(start_inner), std::max(rounds, 1), ran_out};
  out.shape = [inner, offset, ran_out, refusal = std::move(unfinished)](std::span<const Doc> replies) {
    if (ran_out && *ran_out) return ShapedReply{*refusal, {}, {}, {}, {}, {}};
    if (*offset == 0) return ShapedReply{replies.back(), {}, {}, {}, {}, {}};  // stopped in the prelude
    return inner->shape(replies.subspan(std::min(*offset, replies.size())));
  };
  return out;
}

}  // namespace remold
