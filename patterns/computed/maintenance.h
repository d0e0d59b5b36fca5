// Keeping the maintained fields of one ComputedAggregate in step with the
// source documents a client write changed.
//
// The write's changes are recorded first (each source document's inputs
// before and after it); Schedule then queues, phase after phase:
//  1. one update per target: $inc of counts and sums, $max/$min of the
//     new values (upserting a missing target when the rule says so); a
//     $max without followers, or a $min, that set the target's value is
//     then checked: the document it came from is read by _id, and if it no
//     longer holds that value (deleted or changed before the $max landed,
//     so that its writer's recompute missed) the field is recomputed as in
//     3. A write to one target (linked by _id) runs as a findAndModify,
//     whose document as it was says which values it set; a write to
//     several checks every value it carried;
//  2. the latest values: set where the target's max of `by` is the new
//     document's (so the latest write of a concurrent pair wins), then
//     checked: the document they came from is read by _id, and if it no
//     longer holds them at the max (two writers to the same newest document
//     can land their sets in either order) they are recomputed as in 3;
//  3. recomputation where a removed value may have been the target's min
//     or max: read the extreme from the source, compare-and-set it, and
//     read again until what was set is still the extreme;
//  4. derived fields: read the targets, compute, compare-and-set on the
//     values they were computed from.
// While the rule is `migrating`, steps 1 to 3 give way to one: a target's
// values may predate the rule, so each target the write touched is
// recomputed from its sources (count, sum, min, max in one $group), set
// where it differs under a guard that it still holds what was read, and
// checked again until the target and its sources agree.
// Every step is safe under concurrent writers: increments commute, and a
// compare-and-set that misses means a later writer changed the values and
// repairs them itself, except after a recompute's own set (a later round):
// a $max landing since may have moved them only part of the way to the
// extreme read, so the recompute reads the target again and goes on. The
// commands carry no txnNumber outside a transaction; inside one they join
// it.
//
// Pure: commands are queued on a CommandQueue; problems become warnings.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "patterns/computed/rule.h"
#include "patterns/source_writes/source_rule.h"
#include "rewrite/command.h"
#include "rewrite/command_queue.h"

namespace remold {

class AggregateMaintenance : public Follower {
 public:
  // `abort` is called with an error reply when a step fails inside the
  // client's transaction (the backend aborted it: nothing more may run).
  AggregateMaintenance(const ComputedAggregate& aggregate, const Namespace& source,
                       const Command& client, std::vector<std::string>* warnings,
                       std::function<void(const Doc& error)> abort);

  // A source document's inputs (the aggregate's `inputs`) before and after
  // the write; nullptr for "did not exist" / "no longer exists".
  void Record(const bson_t* before, const bson_t* after) override;

  void Schedule(CommandQueue& queue) override;

 private:
  struct NumberDelta {
    int64_t integer = 0;
    double real = 0;
    bool is_real = false;
    bool touched = false;
    void Add(const bson_iter_t& value, int sign);
  };
  struct Target {
    Doc link;  // {v: link value}
    int64_t count = 0;
    bool adds = false;
    std::vector<NumberDelta> sums;             // by field index
    std::vector<std::optional<Doc>> best;      // {v}: the new min/max candidate
    std::vector<std::optional<Doc>> best_id;   // {v}: the _id of the document best is from
    std::vector<std::optional<Doc>> lost;      // {v}: the removed extreme
    std::vector<std::optional<Doc>> latest_by; // {v}
    std::vector<std::optional<Doc>> latest_of; // {v}, or empty: absent
    std::vector<std::optional<Doc>> latest_id; // {v}: the _id of the document latest_of is from
  };

  size_t TargetFor(const bson_iter_t& link);  // index in targets_, added if new
  void Add(Target& target, size_t field, const bson_t* doc);
  void Remove(Target& target, size_t field, const bson_t* doc);

  Doc LinkFilter(const Target& target) const;
  // {find: target, filter: LinkFilter, projection, singleBatch}: what the
  // targets of link `t` hold (up to kTargetsFilled of them).
  BackendCommand ReadTargets(size_t t, const Doc& projection) const;
  Doc MainUpdate(const Target& target) const;
  BackendCommand UpdateCommand(const std::vector<Doc>& statements) const;
  // `expected`: {v: value} the target must still hold, or empty: absent.
  // `attempt` counts reads of the same round (a failed read is repeated).
  // `followers`: the values last set to the field's followers ({}: none).
  void ScheduleRecompute(CommandQueue& queue, size_t target, size_t field, Doc expected, int round,
                         int attempt, std::vector<std::optional<Doc>> followers);
  // After a compare-and-set of a later round missed: reads what the target
  // holds now and recomputes from it (`round` as the next round).
  void ScheduleRecomputeFromTarget(CommandQueue& queue, size_t target, size_t field, int round, int attempt);
  // Reads whether the source document the followers of max field `m` were
  // set from still holds those values at the max; if not, recomputes.
  void ScheduleLatestCheck(CommandQueue& queue, size_t target, size_t m);
  // The min and max fields of the targets of `targets` (indexes) that this
  // write's $max/$min may set and nothing else checks: a max without
  // followers, or a min, with a new value.
  std::vector<std::pair<size_t, size_t>> UncheckedExtremes(const std::vector<size_t>& targets) const;
  // Reads the source documents the values of `checks` ((target, field)
  // pairs, whose $max/$min may have set them) came from, by _id, and
  // recomputes each field whose document no longer holds its value at
  // that target.
  void ScheduleExtremeCheck(CommandQueue& queue, const std::vector<std::pair<size_t, size_t>>& checks);
  // The latest fields ordered by max field `max_field`, in rule order.
  std::vector<size_t> Followers(size_t max_field) const;
  // The max field that orders latest field `latest_field`.
  size_t OrderOf(size_t latest_field) const;
  bool FollowersUnchanged(size_t max_field, const bson_t* before, const bson_t* after) const;
  // Whether a source document read for `max_field` sits at `extreme` and
  // holds `values` in the followers' source fields.
  bool HoldsFollowers(const Doc& doc, const std::optional<Doc>& extreme, size_t max_field,
                      const std::vector<std::optional<Doc>>& values) const;
  void ScheduleDerived(CommandQueue& queue, int attempt);
  // While the rule is migrating: reads the targets of link `t` and the
  // values their sources give, and sets each target that differs, guarded
  // by the values read; then reads both again, until they agree.
  void ScheduleFill(CommandQueue& queue, size_t t, int round, int attempt);
  // Pushes the read of the source values of `t` (`targets`: the target
  // documents read before it).
  void ScheduleFillSources(CommandQueue& queue, size_t t, int round, int attempt,
                           std::vector<Doc> targets);
  void WarnOnFailure(const Doc& reply, const std::string& what);

  ComputedAggregate aggregate_;
  Namespace source_;
  Command client_;
  std::vector<std::string>* warnings_;
  std::function<void(const Doc& error)> abort_;
  std::vector<Target> targets_;
  std::map<std::string, size_t> by_link_;  // link value bytes -> targets_ index
};

}  // namespace remold
