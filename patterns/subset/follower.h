// Keeping each parent's subset in step with the children one client write
// changed (SubsetRule). Recorded first, child by child; then, phase after
// phase:
//  1. the inserted children are pushed onto their parents, one statement
//     per parent in one update ({$push: {$each: [entries], $sort, $slice:
//     N}}), where the parent has the array and none of the entries yet (a
//     concurrent refill may have put one there); when a statement matches
//     nothing, the parents are refilled as in 3 (a parent created after
//     its children has no array yet). Then the children pushed are read
//     back: one that another client deleted, moved or changed before the
//     push landed (its own follow-up found nothing to pull) has its parent
//     refilled as in 3;
//  2. a deleted child is pulled from its parent, one update per parent;
//     a parent that held it is refilled as in 3;
//  3. a parent whose child changed (or moved away or in) is refilled:
//     read the parent's array, then the first N children from the source;
//     if they differ, set the array where it still holds what was read
//     (compare-and-set), and read both again until they agree.
// Every filter compares a link as a value (a document by $eq: one that
// looks like an operator matches only itself); a link holding a regular
// expression names no parent.
// Every step is safe under concurrent writers: a push commutes with
// other pushes, and every compare-and-set is followed by a check that
// reads the source after it, so the last writer to set a parent leaves it
// equal to its children. A parent still changing after several rounds is
// left with a warning to `remold reconcile`. The commands carry no
// txnNumber outside a transaction; inside one they join it.
// Pure: commands are queued on a CommandQueue; problems become warnings.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "patterns/source_writes/source_rule.h"
#include "patterns/subset/rule.h"

namespace remold {

class SubsetFollower final : public Follower {
 public:
  SubsetFollower(const SubsetRule& rule, const FollowerContext& context);

  void Record(const bson_t* before, const bson_t* after) override;
  void Schedule(CommandQueue& queue) override;

 private:
  struct Parent {
    Doc id;                     // {v: the parent's _id}
    std::vector<Doc> pushes;    // entries of inserted children
    std::vector<Doc> pulls;     // {v: _id} of deleted children
    bool refill = false;
  };

  Parent& ParentOf(const bson_iter_t& id);
  // The entry a child's fields make: {_id, copied fields in its order}.
  Doc EntryOf(const bson_t* child) const;
  bool SameEntry(const bson_t* before, const bson_t* after) const;
  // Whether a sort key of `child` holds an array (placed by a refill).
  bool SortsByAnArray(const bson_t* child) const;
  // {$elemMatch: <a sort key of the entry is an array>}.
  Doc EntryWithAnArrayKey() const;

  void SchedulePushes(CommandQueue& queue);
  // Reads the children pushed; refills the parent of any that is no
  // longer as pushed.
  void ScheduleCheckPushed(CommandQueue& queue);
  void SchedulePull(CommandQueue& queue, size_t parent);
  // `attempt` counts reads of the same round (a failed read is repeated).
  void ScheduleRefill(CommandQueue& queue, size_t parent, int round, int attempt);
  void ScheduleChildrenRead(CommandQueue& queue, size_t parent, int round, int attempt,
                            std::optional<Doc> array);
  void Warn(const std::string& what);

  SubsetRule rule_;
  FollowerContext context_;
  std::vector<Parent> parents_;
  std::map<std::string, size_t> by_id_;  // parent _id bytes -> parents_ index
};

}  // namespace remold
