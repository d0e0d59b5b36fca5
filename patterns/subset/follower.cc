#include "patterns/subset/follower.h"

#include <algorithm>

#include "rewrite/bson_compare.h"
#include "rewrite/cursor_reply.h"

namespace remold {
namespace {

// Rounds of read, compare-and-set and check one refill may take while
// other writers keep changing the same parent.
constexpr int kMaxRefillRounds = 8;
// A read that fails (a backend's transient error) is asked again this many
// times before its parent is left to reconciliation: reads and the
// compare-and-set after them are safe to repeat.
constexpr int kReadAttempts = 3;

// A link that can name one parent: present, not null, not an array, not a
// regular expression (no _id is one).
std::optional<bson_iter_t> LinkOf(const bson_t* child, const std::string& field) {
  if (!child) return std::nullopt;
  std::optional<bson_iter_t> link = Find(child, field);
  if (!link || BSON_ITER_HOLDS_NULL(&*link) || BSON_ITER_HOLDS_UNDEFINED(&*link) ||
      BSON_ITER_HOLDS_ARRAY(&*link) || BSON_ITER_HOLDS_REGEX(&*link))
    return std::nullopt;
  return link;
}


bool SameValue(const std::optional<bson_iter_t>& a, const std::optional<bson_iter_t>& b) {
  if (!a || !b) return !a && !b;
  return bson_iter_type(&*a) == bson_iter_type(&*b) && CompareBsonValues(*a, *b) == 0;
}

Doc Statement(const Doc& q, const Doc& u) {
  Doc statement;
  AppendDoc(statement.mut(), "q", q);
  AppendDoc(statement.mut(), "u", u);
  return statement;
}

}  // namespace

SubsetFollower::SubsetFollower(const SubsetRule& rule, const FollowerContext& context)
    : rule_(rule), context_(context) {}

SubsetFollower::Parent& SubsetFollower::ParentOf(const bson_iter_t& id) {
  Doc box;
  AppendValue(box.mut(), "v", id);
  std::string key(reinterpret_cast<const char*>(box.bytes().data()), box.bytes().size());
  auto [it, added] = by_id_.emplace(std::move(key), parents_.size());
  if (added) parents_.push_back(Parent{std::move(box), {}, {}, false});
  return parents_[it->second];
}

Doc SubsetFollower::EntryOf(const bson_t* child) const { return IdAndFields(child, rule_.fields); }

bool SubsetFollower::SameEntry(const bson_t* before, const bson_t* after) const {
  for (const std::string& field : rule_.fields)
    if (!SameValue(Find(before, field), Find(after, field))) return false;
  return true;
}

Doc SubsetFollower::EntryWithAnArrayKey() const {
  std::vector<Doc> clauses;
  for (const SubsetSortKey& key : rule_.sort) {
    // $exists first: an Extended JSON reader takes a leading $type for
    // binary data's legacy form.
    Doc is_array, clause;
    BSON_APPEND_BOOL(is_array.mut(), "$exists", true);
    AppendString(is_array.mut(), "$type", "array");
    AppendDoc(clause.mut(), key.field, is_array);
    clauses.push_back(std::move(clause));
  }
  Doc any, match;
  if (clauses.size() == 1) any = std::move(clauses.front());
  else AppendArray(any.mut(), "$or", clauses);
  AppendDoc(match.mut(), "$elemMatch", any);
  return match;
}

bool SubsetFollower::SortsByAnArray(const bson_t* child) const {
  for (const SubsetSortKey& key : rule_.sort) {
    std::optional<bson_iter_t> value = Find(child, key.field);
    if (value && BSON_ITER_HOLDS_ARRAY(&*value)) return true;
  }
  return false;
}

void SubsetFollower::Record(const bson_t* before, const bson_t* after) {
  std::optional<bson_iter_t> was = LinkOf(before, rule_.link_from);
  std::optional<bson_iter_t> is = LinkOf(after, rule_.link_from);
  if (!before) {
    if (!is) return;
    Parent& parent = ParentOf(*is);
    // Without its _id (the backend generates it) the entry cannot be
    // pushed: the parent is refilled from what is stored. So is one whose
    // sort key holds an array: $push's $sort orders an array as a value of
    // its own type (before every date, say), where the rule's order (a
    // find's sort) takes its largest or smallest element.
    if (Find(after, "_id") && !SortsByAnArray(after)) parent.pushes.push_back(EntryOf(after));
    else parent.refill = true;
    return;
  }
  if (!after) {
    if (!was) return;
    Parent& parent = ParentOf(*was);
    Doc child;
    AppendValue(child.mut(), "v", *Find(before, "_id"));
    parent.pulls.push_back(std::move(child));
    return;
  }
  if (SameValue(was, is) && SameEntry(before, after)) return;  // nothing the subset holds changed
  if (was) ParentOf(*was).refill = true;
  if (is) ParentOf(*is).refill = true;
}

void SubsetFollower::Schedule(CommandQueue& queue) {
  queue.AddPhase([this, &queue] { SchedulePushes(queue); });
  queue.AddPhase([this, &queue] {
    for (size_t p = 0; p < parents_.size(); ++p) {
      if (parents_[p].refill) ScheduleRefill(queue, p, 1, 1);
      else if (!parents_[p].pulls.empty()) SchedulePull(queue, p);
    }
  });
}

void SubsetFollower::SchedulePushes(CommandQueue& queue) {
  std::vector<Doc> statements;
  std::vector<size_t> pushed;  // parents_ index of each statement
  Doc sort;
  for (const SubsetSortKey& key : rule_.Order()) BSON_APPEND_INT32(sort.mut(), key.field.c_str(), key.direction);
  for (size_t p = 0; p < parents_.size(); ++p) {
    const Parent& parent = parents_[p];
    if (parent.refill || parent.pushes.empty()) continue;  // a refill reads every child, these included
    // {_id: parent, <array>: {$exists: true, $not: {$elemMatch: <a sort key
    // is an array>}}, "<array>._id": {$nin: children}}: an array to push
    // onto (a parent without one is refilled), none of the entries twice,
    // and no entry that $push's $sort would misplace: it orders an array
    // as a value of its own type, where the rule's order takes its largest
    // or smallest element (a parent holding such an entry is refilled).
    Doc q, exists, not_there;
    AppendEquals(q.mut(), "_id", Unboxed(parent.id));
    BSON_APPEND_BOOL(exists.mut(), "$exists", true);
    AppendDoc(exists.mut(), "$not", EntryWithAnArrayKey());
    AppendDoc(q.mut(), rule_.array, exists);
    {
      bson_t array;
      bson_append_array_begin(not_there.mut(), "$nin", -1, &array);
      for (size_t i = 0; i < parent.pushes.size(); ++i)
        AppendValue(&array, std::to_string(i), *Find(parent.pushes[i].get(), "_id"));
      bson_append_array_end(not_there.mut(), &array);
    }
    AppendDoc(q.mut(), rule_.array + "._id", not_there);
    Doc each, push, u;
    AppendArray(each.mut(), "$each", parent.pushes);
    AppendDoc(each.mut(), "$sort", sort);
    BSON_APPEND_INT32(each.mut(), "$slice", rule_.limit);
    AppendDoc(push.mut(), rule_.array, each);
    AppendDoc(u.mut(), "$push", push);
    statements.push_back(Statement(q, u));
    pushed.push_back(p);
  }
  if (statements.empty()) return;
  const int64_t sent = static_cast<int64_t>(statements.size());
  BackendCommand update =
      UpdateCommand(context_.client, ArgumentTarget::kPreparatoryWrite, rule_.parent, false,
                    InLockOrder(std::move(statements)));  // one parent each
  update.may_fail = true;
  queue.Push(std::move(update), [this, &queue, pushed, sent](const Doc& reply) {
    ReportFollowUpFailure(context_, reply, "pushing to the subset " + rule_.parent.full() + "." + rule_.array);
    if (!IsOkReply(reply)) return;
    // A statement that matched nothing met a parent without the array, or
    // one already holding an entry: the reply does not say which, so each
    // parent pushed to is refilled (a parent that does not exist is not).
    if (FindInteger(reply.get(), "n").value_or(0) < sent)
      for (size_t p : pushed) parents_[p].refill = true;
    ScheduleCheckPushed(queue);
  });
}

void SubsetFollower::ScheduleCheckPushed(CommandQueue& queue) {
  // {_id: {$in: [pushed]}}, projected to what an entry and its link hold.
  Doc in, filter, projection;
  size_t i = 0;
  {
    bson_t array;
    bson_append_array_begin(in.mut(), "$in", -1, &array);
    for (const Parent& parent : parents_)
      if (!parent.refill)
        for (const Doc& entry : parent.pushes) AppendValue(&array, std::to_string(i++), *Find(entry.get(), "_id"));
    bson_append_array_end(in.mut(), &array);
  }
  AppendDoc(filter.mut(), "_id", in);
  for (const std::string& f : rule_.Inputs()) BSON_APPEND_INT32(projection.mut(), f.c_str(), 1);
  BackendCommand read;
  bson_t* body = read.body.mut();
  AppendString(body, "find", rule_.logical.collection);
  AppendDoc(body, "filter", filter);
  AppendDoc(body, "projection", projection);
  BSON_APPEND_INT32(body, "batchSize", static_cast<int32_t>(i));
  BSON_APPEND_BOOL(body, "singleBatch", true);
  SealCommand(context_.client, ArgumentTarget::kRead, rule_.logical.db, body);
  read.may_fail = true;
  queue.Push(std::move(read), [this](const Doc& reply) {
    if (!IsOkReply(reply)) {
      // Which pushed child changed cannot be told: every parent is refilled.
      for (size_t p = 0; p < parents_.size(); ++p)
        if (!parents_[p].pushes.empty()) parents_[p].refill = true;
      return;
    }
    std::vector<Doc> children = FirstBatch(reply);
    for (Parent& parent : parents_) {
      if (parent.refill) continue;
      for (const Doc& entry : parent.pushes) {
        auto as_pushed = [&](const Doc& child) {
          return SameValue(Find(child.get(), "_id"), Find(entry.get(), "_id")) &&
                 SameValue(LinkOf(child.get(), rule_.link_from), Unboxed(parent.id)) &&
                 SameEntry(child.get(), entry.get());
        };
        if (std::none_of(children.begin(), children.end(), as_pushed)) parent.refill = true;
      }
    }
  });
}

void SubsetFollower::SchedulePull(CommandQueue& queue, size_t p) {
  const Parent& parent = parents_[p];
  // {_id: parent, "<array>._id": {$in: ids}} -> {$pull: {<array>: {_id: {$in: ids}}}}
  // (children's _ids: never an array or a regular expression)
  Doc in;
  {
    bson_t array;
    bson_append_array_begin(in.mut(), "$in", -1, &array);
    for (size_t i = 0; i < parent.pulls.size(); ++i)
      AppendValue(&array, std::to_string(i), Unboxed(parent.pulls[i]));
    bson_append_array_end(in.mut(), &array);
  }
  Doc q, by_id, pull, u;
  AppendEquals(q.mut(), "_id", Unboxed(parent.id));
  AppendDoc(q.mut(), rule_.array + "._id", in);
  AppendDoc(by_id.mut(), "_id", in);
  AppendDoc(pull.mut(), rule_.array, by_id);
  AppendDoc(u.mut(), "$pull", pull);
  BackendCommand update =
      UpdateCommand(context_.client, ArgumentTarget::kPreparatoryWrite, rule_.parent, false, {Statement(q, u)});
  update.may_fail = true;
  queue.Push(std::move(update), [this, &queue, p](const Doc& reply) {
    if (!IsOkReply(reply) || Find(reply.get(), "writeErrors")) {
      ReportFollowUpFailure(context_, reply, "pulling from the subset " + rule_.parent.full() + "." + rule_.array);
      return;
    }
    // The parent held a removed child: one short of N now, refilled.
    if (FindInteger(reply.get(), "n").value_or(0) > 0) ScheduleRefill(queue, p, 1, 1);
  });
}

void SubsetFollower::ScheduleRefill(CommandQueue& queue, size_t p, int round, int attempt) {
  BackendCommand read;
  bson_t* body = read.body.mut();
  AppendString(body, "find", rule_.parent.collection);
  Doc filter, projection;
  AppendEquals(filter.mut(), "_id", Unboxed(parents_[p].id));
  BSON_APPEND_INT32(projection.mut(), rule_.array.c_str(), 1);
  AppendDoc(body, "filter", filter);
  AppendDoc(body, "projection", projection);
  BSON_APPEND_INT32(body, "limit", 1);
  BSON_APPEND_BOOL(body, "singleBatch", true);
  SealCommand(context_.client, ArgumentTarget::kRead, rule_.parent.db, body);
  read.may_fail = true;
  queue.Push(std::move(read), [this, &queue, p, round, attempt](const Doc& reply) {
    if (!IsOkReply(reply)) {
      if (attempt < kReadAttempts && !InTransaction(context_.client))
        return ScheduleRefill(queue, p, round, attempt + 1);
      return ReportFollowUpFailure(context_, reply, "reading the subset " + rule_.parent.full() + "." + rule_.array);
    }
    std::vector<Doc> docs = FirstBatch(reply);
    if (docs.empty()) return;  // no such parent: nothing embeds the subset
    std::optional<Doc> array;
    if (auto value = Find(docs.front().get(), rule_.array)) {
      Doc box;
      AppendValue(box.mut(), "v", *value);
      array = std::move(box);
    }
    ScheduleChildrenRead(queue, p, round, 1, std::move(array));
  });
}

void SubsetFollower::ScheduleChildrenRead(CommandQueue& queue, size_t p, int round, int attempt,
                                          std::optional<Doc> array) {
  BackendCommand read;
  bson_t* body = read.body.mut();
  AppendString(body, "find", rule_.logical.collection);
  // {link: parent, "link.0": {$exists: false}}: the children Record counts
  // for this parent (an array holding it is not one).
  Doc filter, no_element, sort, projection;
  AppendEquals(filter.mut(), rule_.link_from, Unboxed(parents_[p].id));
  BSON_APPEND_BOOL(no_element.mut(), "$exists", false);
  AppendDoc(filter.mut(), rule_.link_from + ".0", no_element);
  for (const SubsetSortKey& key : rule_.Order()) BSON_APPEND_INT32(sort.mut(), key.field.c_str(), key.direction);
  BSON_APPEND_INT32(projection.mut(), "_id", 1);
  for (const std::string& f : rule_.fields) BSON_APPEND_INT32(projection.mut(), f.c_str(), 1);
  AppendDoc(body, "filter", filter);
  AppendDoc(body, "sort", sort);
  AppendDoc(body, "projection", projection);
  BSON_APPEND_INT32(body, "limit", rule_.limit);
  BSON_APPEND_INT32(body, "batchSize", rule_.limit);
  BSON_APPEND_BOOL(body, "singleBatch", true);
  SealCommand(context_.client, ArgumentTarget::kRead, rule_.logical.db, body);
  read.may_fail = true;
  queue.Push(std::move(read), [this, &queue, p, round, attempt, array](const Doc& reply) {
    if (!IsOkReply(reply)) {
      if (attempt < kReadAttempts && !InTransaction(context_.client))
        return ScheduleChildrenRead(queue, p, round, attempt + 1, array);
      return ReportFollowUpFailure(context_, reply, "reading the children of " + rule_.parent.full() + "." + rule_.array);
    }
    std::vector<Doc> children = FirstBatch(reply);
    Doc wanted;
    AppendArray(wanted.mut(), "v", children);
    if (array && *array == wanted) return;  // the parent holds its first N
    if (round > kMaxRefillRounds) {
      Warn("refilling the subset " + rule_.parent.full() + "." + rule_.array + " kept meeting other writers after " +
           std::to_string(kMaxRefillRounds) + " rounds; run `remold reconcile` to check it");
      return;
    }
    // {_id: parent, <array>: {$eq: as read}} (absent: {$exists: false}) -> {$set: {<array>: children}}
    Doc q, guard, set, u;
    AppendEquals(q.mut(), "_id", Unboxed(parents_[p].id));
    if (array) {
      AppendValue(guard.mut(), "$eq", Unboxed(*array));
    } else {
      BSON_APPEND_BOOL(guard.mut(), "$exists", false);
    }
    AppendDoc(q.mut(), rule_.array, guard);
    AppendArray(set.mut(), rule_.array, children);
    AppendDoc(u.mut(), "$set", set);
    BackendCommand update =
        UpdateCommand(context_.client, ArgumentTarget::kPreparatoryWrite, rule_.parent, false, {Statement(q, u)});
    update.may_fail = true;
    queue.Push(std::move(update), [this, &queue, p, round](const Doc& reply) {
      if (!IsOkReply(reply) || Find(reply.get(), "writeErrors")) {
        ReportFollowUpFailure(context_, reply, "refilling the subset " + rule_.parent.full() + "." + rule_.array);
        return;
      }
      // Set or not (another writer changed it first), read both again: a
      // child written since the read may be missing from what was set.
      ScheduleRefill(queue, p, round + 1, 1);
    });
  });
}

void SubsetFollower::Warn(const std::string& what) {
  if (InTransaction(context_.client)) return;  // the transaction's reads and writes cannot meet others
  context_.warnings->push_back(what);
}

}  // namespace remold
