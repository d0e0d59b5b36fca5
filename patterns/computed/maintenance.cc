#include "patterns/computed/maintenance.h"

#include <algorithm>
#include <cmath>

#include "patterns/computed/accumulator.h"
#include "patterns/expression/evaluate.h"
#include "rewrite/bson_compare.h"
#include "rewrite/cursor_reply.h"

namespace remold {
namespace {

// Rounds of read-the-extreme, compare-and-set before remold gives up on a
// target and leaves it to reconciliation (only a storm of writes to the
// same target's extreme can need more than one or two).
constexpr int kMaxRecomputeRounds = 8;

// The field a recompute sorts the sources by, and its value: `of` as it
// is, an array wrapped in an array. $max and $min compare an array as a
// whole, in its place in BSON order (after documents, before binary
// data), but a sort orders a document by an array's largest (descending)
// or smallest (ascending) element: [5] sorts below 7 and is above it for
// $max. An array holding the array sorts by that element, the array as a
// whole (differential seed 2704 on DocumentDB: a date set as the greatest
// of [d1] and an earlier d2, where $max gives d2). Both branches are valid
// for every value (DocumentDB evaluates both: docs/backends.md, 1).
constexpr const char* kExtremeKey = "__remold_extreme";

Doc ExtremeKey(const std::string& of) {
  const std::string path = "$" + of;
  Doc is_array, key, out;
  AppendString(is_array.mut(), "$isArray", path);
  bson_t cond, wrapped;
  BSON_APPEND_ARRAY_BEGIN(key.mut(), "$cond", &cond);
  AppendDoc(&cond, "0", is_array);
  BSON_APPEND_ARRAY_BEGIN(&cond, "1", &wrapped);
  AppendString(&wrapped, "0", path);
  bson_append_array_end(&cond, &wrapped);
  AppendString(&cond, "2", path);
  bson_append_array_end(key.mut(), &cond);
  AppendDoc(out.mut(), kExtremeKey, key);
  return out;
}
// A read that fails (a backend's transient error) is asked again this many
// times before its target is left to reconciliation: the read and the
// compare-and-set after it are safe to repeat.
constexpr int kReadAttempts = 3;
// Source documents read at a max with followers: those tied at the max
// are as good as one another (past this many, a round more settles it).
constexpr int kTiesRead = 16;
// Target documents of one link value a fill reads and sets (a link other
// than _id may have several).
constexpr int kTargetsFilled = 1000;

using Op = MaintainedField::Op;

bool IsNull(const std::optional<bson_iter_t>& value) {
  return !value || BSON_ITER_HOLDS_NULL(&*value) || BSON_ITER_HOLDS_UNDEFINED(&*value);
}

bool SameValue(const std::optional<bson_iter_t>& a, const std::optional<bson_iter_t>& b) {
  if (IsNull(a) || IsNull(b)) return IsNull(a) && IsNull(b);
  return bson_iter_type(&*a) == bson_iter_type(&*b) && CompareBsonValues(*a, *b) == 0;
}

bool SameBox(const std::optional<Doc>& a, const std::optional<Doc>& b) {
  if (!a || !b) return !a && !b;
  return *a == *b;
}

// {field: {$eq: v}}, or {field: null} for an absent value.
void AppendGuard(bson_t* q, const std::string& field, const std::optional<Doc>& value) {
  if (!value) {
    BSON_APPEND_NULL(q, field.c_str());
    return;
  }
  Doc eq;
  AppendValue(eq.mut(), "$eq", Unboxed(*value));
  AppendDoc(q, field, eq);
}

Doc Statement(const Doc& q, const Doc& u, bool multi, bool upsert) {
  Doc statement;
  AppendDoc(statement.mut(), "q", q);
  AppendDoc(statement.mut(), "u", u);
  BSON_APPEND_BOOL(statement.mut(), "multi", multi);
  if (upsert) BSON_APPEND_BOOL(statement.mut(), "upsert", true);
  return statement;
}

// The name of maintained field `i` in the $group of its sources.
std::string GroupName(size_t i) { return "f" + std::to_string(i); }

// Whether a target's stored value of `field` is what its sources give
// (`computed`: the $group's value; absent when no source links to it).
// Counts and sums compare by number, an absent one as 0; min and max by
// value, absent as null.
bool Agrees(const MaintainedField& field, const std::optional<bson_iter_t>& stored,
            const std::optional<bson_iter_t>& computed) {
  if (field.op == Op::kMin || field.op == Op::kMax) return SameValue(stored, computed);
  auto number = [](const std::optional<bson_iter_t>& v) -> std::optional<double> {
    if (IsNull(v)) return 0.0;
    if (!BSON_ITER_HOLDS_NUMBER(&*v)) return std::nullopt;
    return bson_iter_as_double(&*v);
  };
  std::optional<double> a = number(stored), b = number(computed);
  if (!a || !b) return false;
  if (*a == *b) return true;
  return std::fabs(*a - *b) <= 1e-9 * std::max(std::fabs(*a), std::fabs(*b));
}

std::string Describe(const Doc& box) {
  std::string json = box.ToRelaxedJson();  // { "v" : <value> }
  return json.size() > 10 ? json.substr(8, json.size() - 10) : json;
}

}  // namespace

void AggregateMaintenance::NumberDelta::Add(const bson_iter_t& value, int sign) {
  if (!BSON_ITER_HOLDS_NUMBER(&value) || BSON_ITER_HOLDS_DECIMAL128(&value)) return;
  touched = true;
  if (BSON_ITER_HOLDS_DOUBLE(&value)) {
    if (!is_real) real = static_cast<double>(integer);
    is_real = true;
    real += sign * bson_iter_double(&value);
    return;
  }
  const int64_t v = bson_iter_as_int64(&value);
  if (is_real) {
    real += sign * static_cast<double>(v);
  } else if (__builtin_add_overflow(integer, sign * v, &integer)) {
    is_real = true;
    real = static_cast<double>(integer) + sign * static_cast<double>(v);
  }
}

AggregateMaintenance::AggregateMaintenance(const ComputedAggregate& aggregate,
                                           const Namespace& source, const Command& client,
                                           std::vector<std::string>* warnings,
                                           std::function<void(const Doc& error)> abort)
    : aggregate_(aggregate),
      source_(source),
      client_(client),
      warnings_(warnings),
      abort_(std::move(abort)) {}

size_t AggregateMaintenance::TargetFor(const bson_iter_t& link) {
  Doc box = Boxed(link);
  auto bytes = box.bytes();
  std::string key(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  auto [it, fresh] = by_link_.emplace(key, targets_.size());
  if (fresh) {
    const size_t n = aggregate_.fields.size();
    Target target;
    target.link = std::move(box);
    target.sums.resize(n);
    target.best.resize(n);
    target.best_id.resize(n);
    target.lost.resize(n);
    target.latest_by.resize(n);
    target.latest_of.resize(n);
    target.latest_id.resize(n);
    targets_.push_back(std::move(target));
  }
  return it->second;
}

void AggregateMaintenance::Add(Target& target, size_t i, const bson_t* doc) {
  const MaintainedField& field = aggregate_.fields[i];
  std::optional<bson_iter_t> of = field.of.empty() ? std::nullopt : Find(doc, field.of);
  switch (field.op) {
    case Op::kCount:
      break;
    case Op::kSum:
      if (of) target.sums[i].Add(*of, +1);
      break;
    case Op::kMin:
    case Op::kMax:
      if (IsNull(of)) break;
      if (!target.best[i] || (CompareBsonValues(*of, Unboxed(*target.best[i])) > 0) == (field.op == Op::kMax)) {
        target.best[i] = Boxed(*of);
        std::optional<bson_iter_t> id = Find(doc, "_id");
        target.best_id[i] = id ? std::optional<Doc>(Boxed(*id)) : std::nullopt;
      }
      break;
    case Op::kLatest: {
      std::optional<bson_iter_t> by = Find(doc, field.by);
      if (IsNull(by)) break;
      if (target.latest_by[i] && CompareBsonValues(*by, Unboxed(*target.latest_by[i])) < 0) break;
      target.latest_by[i] = Boxed(*by);
      target.latest_of[i] = of ? std::optional<Doc>(Boxed(*of)) : std::nullopt;
      std::optional<bson_iter_t> id = Find(doc, "_id");
      target.latest_id[i] = id ? std::optional<Doc>(Boxed(*id)) : std::nullopt;
      break;
    }
  }
}

void AggregateMaintenance::Remove(Target& target, size_t i, const bson_t* doc) {
  const MaintainedField& field = aggregate_.fields[i];
  std::optional<bson_iter_t> of = field.of.empty() ? std::nullopt : Find(doc, field.of);
  switch (field.op) {
    case Op::kSum:
      if (of) target.sums[i].Add(*of, -1);
      break;
    case Op::kMin:
    case Op::kMax:
      if (IsNull(of)) break;
      if (!target.lost[i] || (CompareBsonValues(*of, Unboxed(*target.lost[i])) > 0) == (field.op == Op::kMax))
        target.lost[i] = Boxed(*of);
      break;
    case Op::kCount:
    case Op::kLatest:  // follows its `by` field's max
      break;
  }
}

void AggregateMaintenance::Record(const bson_t* before, const bson_t* after) {
  std::optional<bson_iter_t> link_before = before ? Find(before, aggregate_.link_from) : std::nullopt;
  std::optional<bson_iter_t> link_after = after ? Find(after, aggregate_.link_from) : std::nullopt;
  // A null, missing or array link counts nowhere (as reconciliation's
  // $group on the link sees it: no target holds an array key).
  auto no_link = [](const std::optional<bson_iter_t>& link) {
    return IsNull(link) || BSON_ITER_HOLDS_ARRAY(&*link);
  };
  if (no_link(link_before)) link_before.reset();
  if (no_link(link_after)) link_after.reset();
  const bool same_link = link_before && link_after && SameValue(link_before, link_after);
  std::optional<size_t> from_index, to_index;
  if (link_before) from_index = TargetFor(*link_before);
  if (link_after) to_index = TargetFor(*link_after);
  Target* from = from_index ? &targets_[*from_index] : nullptr;
  Target* to = to_index ? &targets_[*to_index] : nullptr;
  if (!same_link) {
    if (from) from->count -= 1;
    if (to) to->count += 1;
  }
  for (size_t i = 0; i < aggregate_.fields.size(); ++i) {
    const MaintainedField& field = aggregate_.fields[i];
    if (same_link) {
      bool unchanged = field.op == Op::kCount ||
                       SameValue(Find(before, field.of), Find(after, field.of));
      if (field.op == Op::kLatest)  // a max's followers are set together, from one document
        unchanged = SameValue(Find(before, field.by), Find(after, field.by)) &&
                    FollowersUnchanged(OrderOf(i), before, after);
      if (unchanged) continue;
    }
    if (from) Remove(*from, i, before);
    if (to) Add(*to, i, after);
  }
  if (to && !same_link) to->adds = true;  // a target gaining a source may be created
}

Doc AggregateMaintenance::LinkFilter(const Target& target) const {
  Doc q;
  AppendValue(q.mut(), aggregate_.link_to, Unboxed(target.link));
  return q;
}

BackendCommand AggregateMaintenance::ReadTargets(size_t t, const Doc& projection) const {
  BackendCommand read;
  bson_t* body = read.body.mut();
  AppendString(body, "find", aggregate_.target.collection);
  AppendDoc(body, "filter", LinkFilter(targets_[t]));
  AppendDoc(body, "projection", projection);
  BSON_APPEND_INT32(body, "batchSize", kTargetsFilled);
  BSON_APPEND_BOOL(body, "singleBatch", true);
  SealCommand(client_, ArgumentTarget::kRead, aggregate_.target.db, body);
  read.may_fail = true;
  return read;
}

Doc AggregateMaintenance::MainUpdate(const Target& target) const {
  Doc inc, max, min;
  for (size_t i = 0; i < aggregate_.fields.size(); ++i) {
    const MaintainedField& field = aggregate_.fields[i];
    const char* name = field.field.c_str();
    if (field.op == Op::kCount && target.count != 0) {
      if (target.count >= INT32_MIN && target.count <= INT32_MAX)
        BSON_APPEND_INT32(inc.mut(), name, static_cast<int32_t>(target.count));
      else
        BSON_APPEND_INT64(inc.mut(), name, target.count);
    } else if (field.op == Op::kSum && target.sums[i].touched) {
      const NumberDelta& d = target.sums[i];
      if (d.is_real) BSON_APPEND_DOUBLE(inc.mut(), name, d.real);
      else if (d.integer >= INT32_MIN && d.integer <= INT32_MAX)
        BSON_APPEND_INT32(inc.mut(), name, static_cast<int32_t>(d.integer));
      else BSON_APPEND_INT64(inc.mut(), name, d.integer);
    } else if ((field.op == Op::kMax || field.op == Op::kMin) && target.best[i]) {
      AppendValue((field.op == Op::kMax ? max : min).mut(), field.field, Unboxed(*target.best[i]));
    }
  }
  Doc u;
  if (!inc.empty()) AppendDoc(u.mut(), "$inc", inc);
  if (!max.empty()) AppendDoc(u.mut(), "$max", max);
  if (!min.empty()) AppendDoc(u.mut(), "$min", min);
  return u;
}

BackendCommand AggregateMaintenance::UpdateCommand(const std::vector<Doc>& statements) const {
  // Unordered, each statement one target (by its link, _id or not): in
  // lock order, so that concurrent writers' maintenance never deadlocks.
  BackendCommand command = ::remold::UpdateCommand(client_, ArgumentTarget::kPreparatoryWrite,
                                                   aggregate_.target, false, InLockOrder(statements));
  command.may_fail = true;
  return command;
}

void AggregateMaintenance::WarnOnFailure(const Doc& reply, const std::string& what) {
  ReportFollowUpFailure(FollowerContext{client_, warnings_, abort_, nullptr}, reply, what + " " + aggregate_.target.full());
}

void AggregateMaintenance::Schedule(CommandQueue& queue) {
  const bool multi = aggregate_.link_to != "_id";
  if (aggregate_.migrating) {
    queue.AddPhase([this, &queue] {
      for (size_t t = 0; t < targets_.size(); ++t) ScheduleFill(queue, t, 1, 1);
    });
    if (!aggregate_.derived.empty()) queue.AddPhase([this, &queue] { ScheduleDerived(queue, 1); });
    return;
  }
  queue.AddPhase([this, &queue, multi] {
    std::vector<Doc> statements;
    std::vector<size_t> updated;  // the targets of `statements`
    for (size_t t = 0; t < targets_.size(); ++t) {
      const Target& target = targets_[t];
      Doc u = MainUpdate(target);
      if (u.empty()) continue;
      statements.push_back(Statement(LinkFilter(target), u, multi, aggregate_.create_target && target.adds));
      updated.push_back(t);
    }
    if (statements.empty()) return;
    // A $max without followers, or a $min, may reinstate the value of a
    // document deleted or changed meanwhile: its writer's recompute
    // compared-and-set before this $max landed, missed, and left the target
    // to this write. So what this write set is checked against the
    // document it came from.
    std::vector<std::pair<size_t, size_t>> unchecked = UncheckedExtremes(updated);
    if (unchecked.empty()) {
      queue.Push(UpdateCommand(statements), [this](const Doc& reply) { WarnOnFailure(reply, "maintaining"); });
      return;
    }
    if (statements.size() > 1 || multi) {
      // Whose values an update of several targets set, its reply does not
      // say: every value it carried is checked (if it matched a target).
      queue.Push(UpdateCommand(statements), [this, &queue, unchecked](const Doc& reply) {
        WarnOnFailure(reply, "maintaining");
        if (!IsOkReply(reply) || FindInteger(reply.get(), "n").value_or(0) == 0) return;
        ScheduleExtremeCheck(queue, unchecked);
      });
      return;
    }
    // One target: a findAndModify, whose document as it was tells which of
    // the values the $max and $min set (and only those are checked).
    const Target& target = targets_[updated.front()];
    const bool upsert = aggregate_.create_target && target.adds;
    BackendCommand modify;
    bson_t* body = modify.body.mut();
    AppendString(body, "findAndModify", aggregate_.target.collection);
    AppendDoc(body, "query", LinkFilter(target));
    AppendDoc(body, "update", MainUpdate(target));
    BSON_APPEND_BOOL(body, "new", false);
    if (upsert) BSON_APPEND_BOOL(body, "upsert", true);
    Doc fields;
    BSON_APPEND_INT32(fields.mut(), "_id", 0);
    for (auto [t, i] : unchecked) BSON_APPEND_INT32(fields.mut(), aggregate_.fields[i].field.c_str(), 1);
    AppendDoc(body, "fields", fields);
    SealCommand(client_, ArgumentTarget::kPreparatoryWrite, aggregate_.target.db, body);
    modify.may_fail = true;
    queue.Push(std::move(modify), [this, &queue, unchecked, upsert](const Doc& reply) {
      WarnOnFailure(reply, "maintaining");
      if (!IsOkReply(reply)) return;
      std::optional<bson_iter_t> value = Find(reply.get(), "value");
      if (!value || !BSON_ITER_HOLDS_DOCUMENT(&*value)) {
        // No target was there: an upsert created it with every value; else nothing was set.
        if (upsert) ScheduleExtremeCheck(queue, unchecked);
        return;
      }
      const Doc before = *FindDocument(reply.get(), "value");
      std::vector<std::pair<size_t, size_t>> set;
      for (auto [t, i] : unchecked) {
        const MaintainedField& field = aggregate_.fields[i];
        std::optional<bson_iter_t> was = Find(before.get(), field.field);
        // $max and $min set a missing field, and one the new value passes.
        if (!was) {
          set.emplace_back(t, i);
          continue;
        }
        const int c = CompareBsonValues(Unboxed(*targets_[t].best[i]), *was);
        if (field.op == Op::kMax ? c > 0 : c < 0) set.emplace_back(t, i);
      }
      if (!set.empty()) ScheduleExtremeCheck(queue, set);
    });
  });
  queue.AddPhase([this, &queue, multi] {
    // For each max with followers: the followers' values from the newest
    // document added, set where the max is still that document's. Then
    // check them against that document (ScheduleLatestCheck): a concurrent
    // writer's set of the same max may have landed first.
    std::vector<Doc> statements;
    std::vector<std::pair<size_t, size_t>> set;  // (target, max field)
    for (size_t t = 0; t < targets_.size(); ++t) {
      const Target& target = targets_[t];
      for (size_t m = 0; m < aggregate_.fields.size(); ++m) {
        std::vector<size_t> followers = Followers(m);
        if (followers.empty() || !target.latest_by[followers.front()]) continue;
        Doc q = LinkFilter(target), assign, unset, u;
        AppendGuard(q.mut(), aggregate_.fields[m].field, target.latest_by[followers.front()]);
        for (size_t f : followers) {
          if (target.latest_of[f]) AppendValue(assign.mut(), aggregate_.fields[f].field, Unboxed(*target.latest_of[f]));
          else AppendString(unset.mut(), aggregate_.fields[f].field, "");
        }
        if (!assign.empty()) AppendDoc(u.mut(), "$set", assign);
        if (!unset.empty()) AppendDoc(u.mut(), "$unset", unset);
        statements.push_back(Statement(q, u, multi, false));
        set.emplace_back(t, m);
      }
    }
    if (statements.empty()) return;
    queue.Push(UpdateCommand(statements), [this, &queue, set](const Doc& reply) {
      WarnOnFailure(reply, "setting the latest value");
      if (FindInteger(reply.get(), "n").value_or(0) == 0) return;  // newer maxima everywhere
      for (auto [t, m] : set) ScheduleLatestCheck(queue, t, m);
    });
  });
  queue.AddPhase([this, &queue] {
    for (size_t t = 0; t < targets_.size(); ++t) {
      const Target& target = targets_[t];
      for (size_t i = 0; i < aggregate_.fields.size(); ++i) {
        const MaintainedField& field = aggregate_.fields[i];
        if (!target.lost[i]) continue;
        if (target.best[i]) {
          int c = CompareBsonValues(Unboxed(*target.best[i]), Unboxed(*target.lost[i]));
          if (field.op == Op::kMax ? c >= 0 : c <= 0) continue;  // the new value covers it
        }
        ScheduleRecompute(queue, t, i, *target.lost[i], 1, 1, {});
      }
    }
  });
  if (!aggregate_.derived.empty()) queue.AddPhase([this, &queue] { ScheduleDerived(queue, 1); });
}

// Reads the extreme of field `i` for target `t` from the source, with the
// values of its followers, then sets them where the target still holds
// `expected`; repeats while what it set is no longer the extreme.
// `followers` holds the followers' values last set ({} in round 1: none
// known yet); a round after the first ends when a source document at the
// extreme holds them all.
void AggregateMaintenance::ScheduleRecompute(CommandQueue& queue, size_t t, size_t i, Doc expected,
                                             int round, int attempt,
                                             std::vector<std::optional<Doc>> followers) {
  const MaintainedField& field = aggregate_.fields[i];
  const Target& target = targets_[t];
  const std::vector<size_t> follower_fields = Followers(i);
  BackendCommand read;
  bson_t* body = read.body.mut();
  AppendString(body, "aggregate", source_.collection);
  // {link: L, "link.0": {$exists: false}, of: {$ne: null}}: the sources
  // Record counts for L (an array holding L is not one; "link.0" exists
  // only in a non-empty array).
  Doc match, no_element, not_null, sort, project;
  AppendValue(match.mut(), aggregate_.link_from, Unboxed(target.link));
  BSON_APPEND_BOOL(no_element.mut(), "$exists", false);
  AppendDoc(match.mut(), aggregate_.link_from + ".0", no_element);
  BSON_APPEND_NULL(not_null.mut(), "$ne");
  AppendDoc(match.mut(), field.of, not_null);
  BSON_APPEND_INT32(sort.mut(), kExtremeKey, field.op == Op::kMax ? -1 : 1);
  BSON_APPEND_INT32(project.mut(), "_id", 0);
  BSON_APPEND_INT32(project.mut(), field.of.c_str(), 1);
  BSON_APPEND_INT32(project.mut(), aggregate_.link_from.c_str(), 1);
  for (size_t f : follower_fields) BSON_APPEND_INT32(project.mut(), aggregate_.fields[f].of.c_str(), 1);
  std::vector<Doc> stages(5);
  AppendDoc(stages[0].mut(), "$match", match);
  AppendDoc(stages[1].mut(), "$addFields", ExtremeKey(field.of));
  AppendDoc(stages[2].mut(), "$sort", sort);
  // With followers, the documents tied at the extreme are read too: any of
  // them holding the values set is an answer.
  BSON_APPEND_INT32(stages[3].mut(), "$limit", follower_fields.empty() ? 1 : kTiesRead);
  AppendDoc(stages[4].mut(), "$project", project);
  AppendArray(body, "pipeline", stages);
  Doc cursor;
  AppendDoc(body, "cursor", cursor);
  SealCommand(client_, ArgumentTarget::kRead, source_.db, body);
  read.may_fail = true;

  queue.Push(std::move(read), [this, &queue, t, i, expected, round, attempt, follower_fields,
                               followers = std::move(followers)](const Doc& reply) {
    const MaintainedField& field = aggregate_.fields[i];
    if (!IsOkReply(reply)) {
      if (attempt < kReadAttempts && !InTransaction(client_)) {
        ScheduleRecompute(queue, t, i, expected, round, attempt + 1, followers);
        return;
      }
      WarnOnFailure(reply, "recomputing " + field.field);
      return;
    }
    std::vector<Doc> docs = FirstBatch(reply);
    const Doc* top = docs.empty() ? nullptr : &docs.front();
    for (const Doc& doc : docs) {
      if (SameValue(Find(doc.get(), aggregate_.link_from), Unboxed(targets_[t].link))) continue;
      // A backend that answered with a document its filter does not match
      // (an index entry read mid-update): ask again.
      if (attempt < kReadAttempts) {
        ScheduleRecompute(queue, t, i, expected, round, attempt + 1, followers);
        return;
      }
      warnings_->push_back("recomputing " + field.field + " of " + aggregate_.target.full() +
                           ": the backend kept answering with a document of another target; run "
                           "`remold reconcile` to check it");
      return;
    }
    std::optional<Doc> extreme;
    if (top)
      if (auto v = Find(top->get(), field.of)) extreme = Boxed(*v);
    const std::optional<Doc> was = expected.empty() ? std::nullopt : std::optional<Doc>(expected);
    if (round > 1 && SameBox(extreme, was) &&
        (!extreme || std::any_of(docs.begin(), docs.end(), [&](const Doc& doc) {
          return HoldsFollowers(doc, extreme, i, followers);
        })))
      return;  // what was set is still the extreme, and a document there holds it
    if (round > kMaxRecomputeRounds) {
      warnings_->push_back("recomputing " + field.field + " of " + aggregate_.target.full() + " " +
                           Describe(targets_[t].link) + " did not settle after " +
                           std::to_string(kMaxRecomputeRounds) +
                           " rounds of concurrent writes; run `remold reconcile` to check it");
      return;
    }
    Doc q = LinkFilter(targets_[t]);
    AppendGuard(q.mut(), field.field, was);
    Doc assign, unset, u;
    if (extreme) AppendValue(assign.mut(), field.field, Unboxed(*extreme));
    else AppendString(unset.mut(), field.field, "");
    std::vector<std::optional<Doc>> next_followers;
    for (size_t f : follower_fields) {
      const MaintainedField& latest = aggregate_.fields[f];
      std::optional<bson_iter_t> of = top ? Find(top->get(), latest.of) : std::nullopt;
      if (extreme && of) {
        AppendValue(assign.mut(), latest.field, *of);
        next_followers.push_back(Boxed(*of));
      } else {
        AppendString(unset.mut(), latest.field, "");
        next_followers.push_back(std::nullopt);
      }
    }
    if (!assign.empty()) AppendDoc(u.mut(), "$set", assign);
    if (!unset.empty()) AppendDoc(u.mut(), "$unset", unset);
    Doc next_expected = extreme ? *extreme : Doc();
    queue.Push(UpdateCommand({Statement(q, u, aggregate_.link_to != "_id", false)}),
               [this, &queue, t, i, next_expected, round, next_followers](const Doc& reply) {
                 WarnOnFailure(reply, "recomputing " + aggregate_.fields[i].field);
                 if (!IsOkReply(reply)) return;
                 if (FindInteger(reply.get(), "n").value_or(0) == 0) {
                   // Changed meanwhile. In round 1 nothing of this recompute
                   // has landed, and whoever changed the target answers for
                   // it. In a later round this recompute has itself set the
                   // target, maybe below a value whose $max or $min the old
                   // extreme absorbed; a $max landing since may have moved it
                   // only part of the way to the extreme just read, and its
                   // writer answers for no more than its own value: go on
                   // from what the target holds now.
                   if (round > 1) ScheduleRecomputeFromTarget(queue, t, i, round + 1, 1);
                   return;
                 }
                 ScheduleRecompute(queue, t, i, next_expected, round + 1, 1, next_followers);
               });
  });
}

// Reads what the targets of link `t` hold in field `i` and its followers,
// and goes on recomputing from each distinct state read (one, unless the
// link is not _id and its targets differ).
void AggregateMaintenance::ScheduleRecomputeFromTarget(CommandQueue& queue, size_t t, size_t i, int round,
                                                       int attempt) {
  const std::vector<size_t> follower_fields = Followers(i);
  Doc projection;
  BSON_APPEND_INT32(projection.mut(), "_id", 0);
  BSON_APPEND_INT32(projection.mut(), aggregate_.fields[i].field.c_str(), 1);
  for (size_t f : follower_fields) BSON_APPEND_INT32(projection.mut(), aggregate_.fields[f].field.c_str(), 1);
  queue.Push(ReadTargets(t, projection), [this, &queue, t, i, round, attempt, follower_fields](const Doc& reply) {
    if (!IsOkReply(reply)) {
      if (attempt < kReadAttempts && !InTransaction(client_))
        return ScheduleRecomputeFromTarget(queue, t, i, round, attempt + 1);
      return WarnOnFailure(reply, "reading the target to recompute " + aggregate_.fields[i].field);
    }
    auto boxed = [](const Doc& doc, const std::string& field) {
      std::optional<bson_iter_t> v = Find(doc.get(), field);
      return IsNull(v) ? std::nullopt : std::optional<Doc>(Boxed(*v));
    };
    std::vector<std::vector<std::optional<Doc>>> states;  // [value, followers...]
    for (const Doc& doc : FirstBatch(reply)) {
      std::vector<std::optional<Doc>> state{boxed(doc, aggregate_.fields[i].field)};
      for (size_t f : follower_fields) state.push_back(boxed(doc, aggregate_.fields[f].field));
      if (std::none_of(states.begin(), states.end(), [&](const auto& seen) {
            return std::equal(seen.begin(), seen.end(), state.begin(), state.end(), SameBox);
          }))
        states.push_back(std::move(state));
    }
    for (auto& state : states) {
      Doc expected = state.front() ? *state.front() : Doc();
      ScheduleRecompute(queue, t, i, std::move(expected), round, 1,
                        std::vector<std::optional<Doc>>(state.begin() + 1, state.end()));
    }
  });
}

// One point read by _id (a filter on _id alone, which every backend serves
// from its _id index): the document the followers were set from. If it
// still has the link, the max and every follower's value, what was set is
// right; if not, another writer changed that document or its target, and
// the followers are recomputed from the source.
void AggregateMaintenance::ScheduleLatestCheck(CommandQueue& queue, size_t t, size_t m) {
  const Target& target = targets_[t];
  const std::vector<size_t> followers = Followers(m);
  const size_t first = followers.front();
  std::vector<std::optional<Doc>> values;
  for (size_t f : followers) values.push_back(target.latest_of[f]);
  if (!target.latest_id[first]) {  // no _id to read by: check through the source's extreme
    ScheduleRecompute(queue, t, m, *target.latest_by[first], 2, 1, std::move(values));
    return;
  }
  Doc filter, projection;
  AppendValue(filter.mut(), "_id", Unboxed(*target.latest_id[first]));
  BSON_APPEND_INT32(projection.mut(), "_id", 0);
  BSON_APPEND_INT32(projection.mut(), aggregate_.link_from.c_str(), 1);
  BSON_APPEND_INT32(projection.mut(), aggregate_.fields[m].of.c_str(), 1);
  for (size_t f : followers) BSON_APPEND_INT32(projection.mut(), aggregate_.fields[f].of.c_str(), 1);
  BackendCommand read;
  bson_t* body = read.body.mut();
  AppendString(body, "find", source_.collection);
  AppendDoc(body, "filter", filter);
  AppendDoc(body, "projection", projection);
  BSON_APPEND_INT32(body, "limit", 1);
  BSON_APPEND_BOOL(body, "singleBatch", true);
  SealCommand(client_, ArgumentTarget::kRead, source_.db, body);
  read.may_fail = true;
  queue.Push(std::move(read), [this, &queue, t, m, values = std::move(values)](const Doc& reply) {
    const Target& target = targets_[t];
    const std::optional<Doc> at = target.latest_by[Followers(m).front()];
    std::vector<Doc> docs = IsOkReply(reply) ? FirstBatch(reply) : std::vector<Doc>();
    if (!docs.empty()) {
      std::optional<bson_iter_t> link = Find(docs.front().get(), aggregate_.link_from);
      if (link && !BSON_ITER_HOLDS_ARRAY(&*link) && SameValue(link, Unboxed(target.link)) &&
          HoldsFollowers(docs.front(), at, m, values))
        return;  // still holds what was set
    }
    ScheduleRecompute(queue, t, m, *at, 1, 1, {});
  });
}

std::vector<std::pair<size_t, size_t>> AggregateMaintenance::UncheckedExtremes(
    const std::vector<size_t>& targets) const {
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t t : targets)
    for (size_t i = 0; i < aggregate_.fields.size(); ++i) {
      const Op op = aggregate_.fields[i].op;
      if (!targets_[t].best[i]) continue;
      if (op == Op::kMin || (op == Op::kMax && Followers(i).empty())) out.emplace_back(t, i);
    }
  return out;
}

// One read of the source by _id (a filter on _id alone, which every
// backend serves from its _id index; $in when the values came from
// several documents). A document that still has the link and the value
// was there after the $max or $min landed: a later delete or change of it
// recomputes from the value this write set. One that is gone or changed
// may have been so before, its writer's compare-and-set missing this
// value: the field is recomputed (round 1: a miss means a writer changed
// the target since this write's $max, and answers for it).
void AggregateMaintenance::ScheduleExtremeCheck(CommandQueue& queue,
                                                const std::vector<std::pair<size_t, size_t>>& checks) {
  std::vector<Doc> ids;  // {v: _id}, distinct
  std::vector<std::pair<size_t, size_t>> by_id;
  for (auto [t, i] : checks) {
    const std::optional<Doc>& id = targets_[t].best_id[i];
    if (!id) {  // no _id to read by: check through the source's extreme
      ScheduleRecompute(queue, t, i, *targets_[t].best[i], 2, 1, {});
      continue;
    }
    by_id.emplace_back(t, i);
    if (std::none_of(ids.begin(), ids.end(), [&](const Doc& seen) { return seen == *id; })) ids.push_back(*id);
  }
  if (ids.empty()) return;
  Doc filter, projection;
  if (ids.size() == 1) {
    AppendValue(filter.mut(), "_id", Unboxed(ids.front()));
  } else {
    Doc in;
    bson_t array;
    BSON_APPEND_ARRAY_BEGIN(in.mut(), "$in", &array);
    for (size_t k = 0; k < ids.size(); ++k) AppendValue(&array, std::to_string(k), Unboxed(ids[k]));
    bson_append_array_end(in.mut(), &array);
    AppendDoc(filter.mut(), "_id", in);
  }
  std::vector<std::string> fields{aggregate_.link_from};
  for (auto [t, i] : by_id)
    if (std::find(fields.begin(), fields.end(), aggregate_.fields[i].of) == fields.end())
      fields.push_back(aggregate_.fields[i].of);
  for (const std::string& f : fields) BSON_APPEND_INT32(projection.mut(), f.c_str(), 1);
  BackendCommand read;
  bson_t* body = read.body.mut();
  AppendString(body, "find", source_.collection);
  AppendDoc(body, "filter", filter);
  AppendDoc(body, "projection", projection);
  if (ids.size() == 1) {
    BSON_APPEND_INT32(body, "limit", 1);
  } else {
    BSON_APPEND_INT32(body, "batchSize", static_cast<int32_t>(ids.size()));
  }
  BSON_APPEND_BOOL(body, "singleBatch", true);
  SealCommand(client_, ArgumentTarget::kRead, source_.db, body);
  read.may_fail = true;
  queue.Push(std::move(read), [this, &queue, by_id](const Doc& reply) {
    // A failed read confirms nothing: every value is recomputed.
    std::vector<Doc> docs = IsOkReply(reply) ? FirstBatch(reply) : std::vector<Doc>();
    // Not a structured binding: clang 14 (the fuzz build) cannot capture one.
    for (const auto& entry : by_id) {
      const size_t t = entry.first, i = entry.second;
      const Target& target = targets_[t];
      const MaintainedField& field = aggregate_.fields[i];
      const bool holds = std::any_of(docs.begin(), docs.end(), [&](const Doc& doc) {
        std::optional<bson_iter_t> link = Find(doc.get(), aggregate_.link_from);
        return SameValue(Find(doc.get(), "_id"), Unboxed(*target.best_id[i])) && link &&
               !BSON_ITER_HOLDS_ARRAY(&*link) && SameValue(link, Unboxed(target.link)) &&
               SameValue(Find(doc.get(), field.of), Unboxed(*target.best[i]));
      });
      if (!holds) ScheduleRecompute(queue, t, i, *target.best[i], 1, 1, {});
    }
  });
}

std::vector<size_t> AggregateMaintenance::Followers(size_t max_field) const {
  std::vector<size_t> followers;
  const MaintainedField& order = aggregate_.fields[max_field];
  if (order.op != Op::kMax) return followers;
  for (size_t f = 0; f < aggregate_.fields.size(); ++f)
    if (aggregate_.fields[f].op == Op::kLatest && aggregate_.fields[f].by_field == order.field)
      followers.push_back(f);
  return followers;
}

size_t AggregateMaintenance::OrderOf(size_t latest_field) const {
  for (size_t m = 0; m < aggregate_.fields.size(); ++m)
    if (aggregate_.fields[m].op == Op::kMax && aggregate_.fields[m].field == aggregate_.fields[latest_field].by_field)
      return m;
  return latest_field;  // unreachable: the loader requires the max beside a latest
}

bool AggregateMaintenance::FollowersUnchanged(size_t max_field, const bson_t* before,
                                              const bson_t* after) const {
  for (size_t f : Followers(max_field))
    if (!SameValue(Find(before, aggregate_.fields[f].of), Find(after, aggregate_.fields[f].of))) return false;
  return true;
}

bool AggregateMaintenance::HoldsFollowers(const Doc& doc, const std::optional<Doc>& extreme,
                                          size_t max_field,
                                          const std::vector<std::optional<Doc>>& values) const {
  auto boxed = [&doc](const std::string& field) {
    std::optional<bson_iter_t> v = Find(doc.get(), field);
    return v ? std::optional<Doc>(Boxed(*v)) : std::nullopt;
  };
  if (!SameBox(boxed(aggregate_.fields[max_field].of), extreme)) return false;
  const std::vector<size_t> followers = Followers(max_field);
  for (size_t k = 0; k < followers.size() && k < values.size(); ++k)
    if (!SameBox(boxed(aggregate_.fields[followers[k]].of), values[k])) return false;
  return true;
}

// Reads the touched targets' maintained fields, computes the derived ones,
// and sets those that differ where the fields they read are unchanged.
void AggregateMaintenance::ScheduleDerived(CommandQueue& queue, int attempt) {
  if (targets_.empty()) return;
  std::vector<std::string> inputs;
  for (const auto& d : aggregate_.derived)
    for (const auto& f : d.inputs)
      if (std::find(inputs.begin(), inputs.end(), f) == inputs.end()) inputs.push_back(f);
  BackendCommand read;
  bson_t* body = read.body.mut();
  AppendString(body, "find", aggregate_.target.collection);
  Doc filter, in, projection;
  bson_t array;
  BSON_APPEND_ARRAY_BEGIN(in.mut(), "$in", &array);
  for (size_t t = 0; t < targets_.size(); ++t)
    AppendValue(&array, std::to_string(t), Unboxed(targets_[t].link));
  bson_append_array_end(in.mut(), &array);
  AppendDoc(filter.mut(), aggregate_.link_to, in);
  AppendDoc(body, "filter", filter);
  BSON_APPEND_INT32(projection.mut(), "_id", 1);
  for (const auto& f : inputs) BSON_APPEND_INT32(projection.mut(), f.c_str(), 1);
  for (const auto& d : aggregate_.derived) BSON_APPEND_INT32(projection.mut(), d.field.c_str(), 1);
  AppendDoc(body, "projection", projection);
  BSON_APPEND_INT32(body, "batchSize", static_cast<int32_t>(targets_.size()) + 1);
  BSON_APPEND_BOOL(body, "singleBatch", true);
  SealCommand(client_, ArgumentTarget::kRead, aggregate_.target.db, body);
  read.may_fail = true;
  queue.Push(std::move(read), [this, &queue, inputs, attempt](const Doc& reply) {
    if (!IsOkReply(reply)) {
      if (attempt < kReadAttempts && !InTransaction(client_)) {
        ScheduleDerived(queue, attempt + 1);
        return;
      }
      WarnOnFailure(reply, "reading targets for derived fields");
      return;
    }
    std::vector<Doc> statements;
    std::vector<Doc> docs = FirstBatch(reply);
    for (const Doc& doc : docs) {
      std::optional<bson_iter_t> id = Find(doc.get(), "_id");
      if (!id) continue;  // none the backend stores (a misbehaving backend)
      Doc set;
      for (const auto& d : aggregate_.derived) {
        auto value = Evaluate(d.expression, doc.get());
        if (auto* error = std::get_if<EvaluationError>(&value)) {
          warnings_->push_back("derived field " + d.field + " of " + aggregate_.target.full() + ": " +
                               error->message);
          continue;
        }
        std::optional<bson_iter_t> stored = Find(doc.get(), d.field);
        const ComputedValue& v = std::get<ComputedValue>(value);
        if (!HoldsValue(stored ? &*stored : nullptr, v) || !stored) AppendComputedValue(set.mut(), d.field, v);
      }
      if (set.empty()) continue;
      Doc q, u;
      AppendValue(q.mut(), "_id", *id);
      for (const auto& f : inputs) {
        std::optional<bson_iter_t> v = Find(doc.get(), f);
        AppendGuard(q.mut(), f, v ? std::optional<Doc>(Boxed(*v)) : std::nullopt);
      }
      AppendDoc(u.mut(), "$set", set);
      statements.push_back(Statement(q, u, false, false));
    }
    if (statements.empty()) return;
    queue.Push(UpdateCommand(statements), [this](const Doc& reply) { WarnOnFailure(reply, "setting derived fields"); });
  });
}

// Round 1 runs after the client's write; a round that set a target, or
// lost its guard to another writer, is followed by another, which ends the
// loop when nothing differs.
void AggregateMaintenance::ScheduleFill(CommandQueue& queue, size_t t, int round, int attempt) {
  Doc projection;
  BSON_APPEND_INT32(projection.mut(), "_id", 1);
  for (const MaintainedField& field : aggregate_.fields) BSON_APPEND_INT32(projection.mut(), field.field.c_str(), 1);
  queue.Push(ReadTargets(t, projection), [this, &queue, t, round, attempt](const Doc& reply) {
    if (!IsOkReply(reply)) {
      if (attempt < kReadAttempts && !InTransaction(client_)) return ScheduleFill(queue, t, round, attempt + 1);
      return WarnOnFailure(reply, "reading the targets to fill");
    }
    ScheduleFillSources(queue, t, round, 1, FirstBatch(reply));
  });
}

void AggregateMaintenance::ScheduleFillSources(CommandQueue& queue, size_t t, int round, int attempt,
                                               std::vector<Doc> targets) {
  BackendCommand read;
  bson_t* body = read.body.mut();
  AppendString(body, "aggregate", source_.collection);
  // The sources Record counts for the link (not an array holding it).
  Doc match, no_element, group;
  AppendValue(match.mut(), aggregate_.link_from, Unboxed(targets_[t].link));
  BSON_APPEND_BOOL(no_element.mut(), "$exists", false);
  AppendDoc(match.mut(), aggregate_.link_from + ".0", no_element);
  BSON_APPEND_NULL(group.mut(), "_id");
  for (size_t i = 0; i < aggregate_.fields.size(); ++i) {
    // A migrating rule has no latest field (rule.cc): no $first without its $sort.
    AppendDoc(group.mut(), GroupName(i), GroupAccumulator(aggregate_.fields[i]));
  }
  std::vector<Doc> stages(2);
  AppendDoc(stages[0].mut(), "$match", match);
  AppendDoc(stages[1].mut(), "$group", group);
  AppendArray(body, "pipeline", stages);
  AppendDoc(body, "cursor", Doc());
  SealCommand(client_, ArgumentTarget::kRead, source_.db, body);
  read.may_fail = true;
  queue.Push(std::move(read), [this, &queue, t, round, attempt, targets = std::move(targets)](const Doc& reply) {
    if (!IsOkReply(reply)) {
      if (attempt < kReadAttempts && !InTransaction(client_))
        return ScheduleFillSources(queue, t, round, attempt + 1, targets);
      return WarnOnFailure(reply, "reading the sources to fill");
    }
    std::vector<Doc> groups = FirstBatch(reply);
    std::vector<Doc> statements;
    for (const Doc& target : targets) {
      std::optional<bson_iter_t> id = Find(target.get(), "_id");
      if (!id) continue;  // none the backend stores (a misbehaving backend)
      Doc q, assign, unset, u;
      AppendValue(q.mut(), "_id", *id);
      bool differs = false;
      for (size_t i = 0; i < aggregate_.fields.size(); ++i) {
        const MaintainedField& field = aggregate_.fields[i];
        std::optional<bson_iter_t> stored = Find(target.get(), field.field);
        std::optional<bson_iter_t> computed =
            groups.empty() ? std::nullopt : Find(groups.front().get(), GroupName(i));
        AppendGuard(q.mut(), field.field, IsNull(stored) ? std::nullopt : std::optional<Doc>(Boxed(*stored)));
        if (Agrees(field, stored, computed)) continue;
        differs = true;
        if (!IsNull(computed)) AppendValue(assign.mut(), field.field, *computed);
        else if (field.op == Op::kCount || field.op == Op::kSum) BSON_APPEND_INT32(assign.mut(), field.field.c_str(), 0);
        else AppendString(unset.mut(), field.field, "");
      }
      if (!differs) continue;
      if (!assign.empty()) AppendDoc(u.mut(), "$set", assign);
      if (!unset.empty()) AppendDoc(u.mut(), "$unset", unset);
      statements.push_back(Statement(q, u, false, false));
    }
    if (targets.empty() && !groups.empty() && aggregate_.create_target) {
      // A missing target is created from its sources' values, only if it is still missing.
      Doc set_on_insert, u;
      for (size_t i = 0; i < aggregate_.fields.size(); ++i) {
        std::optional<bson_iter_t> computed = Find(groups.front().get(), GroupName(i));
        if (!IsNull(computed)) AppendValue(set_on_insert.mut(), aggregate_.fields[i].field, *computed);
      }
      AppendDoc(u.mut(), "$setOnInsert", set_on_insert);
      statements.push_back(Statement(LinkFilter(targets_[t]), u, false, true));
    }
    if (statements.empty()) return;  // the targets agree with their sources
    if (round >= kMaxRecomputeRounds) {
      warnings_->push_back("filling the values of " + aggregate_.target.full() + " " +
                           Describe(targets_[t].link) + " did not settle after " +
                           std::to_string(kMaxRecomputeRounds) +
                           " rounds of concurrent writes; run `remold reconcile` to check it");
      return;
    }
    queue.Push(UpdateCommand(statements), [this, &queue, t, round](const Doc& reply) {
      WarnOnFailure(reply, "filling");
      if (IsOkReply(reply)) ScheduleFill(queue, t, round + 1, 1);
    });
  });
}

}  // namespace remold
