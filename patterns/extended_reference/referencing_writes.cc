#include "patterns/extended_reference/referencing_writes.h"

#include <functional>
#include <map>
#include <set>

#include "patterns/extended_reference/copies.h"
#include "patterns/source_writes/source_write.h"
#include "patterns/source_writes/update_apply.h"
#include "rewrite/command_queue.h"
#include "rewrite/refused_statements.h"

namespace remold {
namespace {

std::string_view FirstComponent(std::string_view path) { return path.substr(0, path.find('.')); }

std::string SyncCheckLine(const ExtendedReferenceRule& rule) {
  return "read the documents of " + rule.referenced.full() + " copied again: one changed since it was read has "
         "its copies synced (" + SyncLine(rule) + ")";
}

// The copies written, checked against the referenced documents as they are
// now (synced mode): another client may have changed one between remold's
// read and the write, after its own sync ran.
class CopyCheck {
 public:
  CopyCheck(const ExtendedReferenceRule& rule, const FollowerContext& context)
      : rule_(rule), context_(context), sync_(rule, context) {}

  // A document was written holding `copy` ({v: copy}) of `reference`.
  void Wrote(const bson_iter_t& reference, const Doc& copy) {
    const std::string key = KeyOf(reference);
    if (written_.count(key)) {
      if (!(written_.at(key).second == copy)) differs_.insert(key);  // two copies: sync it
      return;
    }
    written_.emplace(key, std::make_pair(Boxed(reference), copy));
  }

  void Schedule(CommandQueue& queue) {
    if (written_.empty()) return;
    std::vector<Doc> refs;
    for (const auto& [key, entry] : written_) refs.push_back(entry.first);
    queue.Push(ReadReferenced(rule_, refs, context_.client), [this, &queue](const Doc& reply) {
      if (!IsOkReply(reply))
        return ReportFollowUpFailure(context_, reply, "reading " + rule_.referenced.full() + " to check the copies");
      CopyTable now(rule_, reply);
      for (const auto& [key, entry] : written_) {
        std::optional<Doc> copy = now.For(Unboxed(entry.first));
        if (!copy) {
          Doc null;
          BSON_APPEND_NULL(null.mut(), "v");
          copy = std::move(null);  // gone since: the copies say so
        }
        if (differs_.count(key) || !(*copy == entry.second)) sync_.Schedule(queue, entry.first);
      }
    });
  }

 private:
  ExtendedReferenceRule rule_;
  FollowerContext context_;
  CopySync sync_;
  std::map<std::string, std::pair<Doc, Doc>> written_;  // key -> ({v: reference}, {v: copy})
  std::set<std::string> differs_;
};

// The inserted documents' copies, for the shared insert flow.
class CopiesWritten final : public Follower {
 public:
  CopiesWritten(const ExtendedReferenceRule& rule, const FollowerContext& context) : check_(rule, context), rule_(rule) {}
  void Record(const bson_t*, const bson_t* after) override {
    std::optional<bson_iter_t> ref = ReferenceOf(after, rule_.reference);
    std::optional<bson_iter_t> copy = after ? Find(after, rule_.into) : std::nullopt;
    if (ref && copy) check_.Wrote(*ref, Boxed(*copy));
  }
  void Schedule(CommandQueue& queue) override {
    queue.AddPhase([this, &queue] { check_.Schedule(queue); });
  }

 private:
  CopyCheck check_;
  ExtendedReferenceRule rule_;
};

// The referencing collection as the shared insert flow sees it.
class ReferencingSource final : public SourceRule {
 public:
  explicit ReferencingSource(const ExtendedReferenceRule& rule) : rule_(rule) {}

  const Namespace& source() const override { return rule_.logical; }
  std::string Kind() const override { return "an extended reference rule"; }
  std::vector<std::string> Watched() const override { return {rule_.reference, rule_.into}; }
  std::vector<std::unique_ptr<Follower>> Followers(const FollowerContext& context) const override {
    std::vector<std::unique_ptr<Follower>> followers;
    if (rule_.mode == ExtendedReferenceRule::Mode::kSynced)
      followers.push_back(std::make_unique<CopiesWritten>(rule_, context));
    return followers;
  }
  std::vector<std::string> FollowUps(const std::string&) const override {
    std::vector<std::string> lines = {"insert the documents into " + rule_.logical.full() + " with their copies in '" +
                                      rule_.into + "' (command 1 read the documents they reference)"};
    if (rule_.mode == ExtendedReferenceRule::Mode::kSynced) lines.push_back(SyncCheckLine(rule_));
    return lines;
  }
  std::optional<BackendCommand> InsertPreRead(const std::vector<Doc>& documents,
                                              const Command& client) const override {
    std::vector<Doc> refs;
    std::set<std::string> seen;
    for (const Doc& doc : documents)
      if (auto ref = ReferenceOf(doc.get(), rule_.reference); ref && seen.insert(KeyOf(*ref)).second)
        refs.push_back(Boxed(*ref));
    if (refs.empty()) return std::nullopt;
    return ReadReferenced(rule_, refs, client);
  }
  std::optional<Refusal> PrepareInsert(const bson_t* doc, Doc& out, const Doc* pre_read) const override;

 private:
  ExtendedReferenceRule rule_;
};

Refusal WritesTheCopy(const ExtendedReferenceRule& rule) {
  return {error_codes::kImmutableField,
          rule.Who() + ": '" + rule.into + "' is copied by remold from " + rule.referenced.full() +
              " (the document '" + rule.reference + "' refers to); it cannot be written"};
}

Refusal NotOneReference(const ExtendedReferenceRule& rule) {
  return {error_codes::kBadValue, rule.Who() + ": '" + rule.reference +
                                      "' is an array; an extended reference names one document of " +
                                      rule.referenced.full()};
}

// `doc` with `into` set to `copy` ({v: copy}; nullopt: without `into`), in
// its place when the document has one, else last.
Doc WithCopy(const bson_t* doc, const std::string& into, const std::optional<Doc>& copy) {
  Doc out;
  bool placed = false;
  bson_iter_t it;
  bson_iter_init(&it, doc);
  while (bson_iter_next(&it)) {
    if (std::string_view(bson_iter_key(&it)) != into) {
      AppendValue(out.mut(), bson_iter_key(&it), it);
    } else if (copy) {
      AppendValue(out.mut(), into, Unboxed(*copy));
      placed = true;
    }
  }
  if (copy && !placed) AppendValue(out.mut(), into, Unboxed(*copy));
  return out;
}

// The copy a document referencing `ref` gets (nullopt: none, for a
// document without a reference), or why it cannot be written.
std::optional<Refusal> CopyFor(const ExtendedReferenceRule& rule, const bson_t* doc, const CopyTable* table,
                               std::optional<Doc>& copy) {
  copy.reset();
  std::optional<bson_iter_t> value = Find(doc, rule.reference);
  if (value && BSON_ITER_HOLDS_ARRAY(&*value)) return NotOneReference(rule);
  std::optional<bson_iter_t> ref = ReferenceOf(doc, rule.reference);
  if (!ref) return std::nullopt;
  if (table) copy = table->For(*ref);
  if (!copy) return MissingReference(rule, *ref);
  return std::nullopt;
}

std::optional<Refusal> ReferencingSource::PrepareInsert(const bson_t* doc, Doc& out, const Doc* pre_read) const {
  std::optional<CopyTable> table;
  if (pre_read) table.emplace(rule_, *pre_read);
  std::optional<Doc> copy;
  if (auto refusal = CopyFor(rule_, doc, table ? &*table : nullptr, copy)) return refusal;
  // A client's own copy is accepted when it is the copy (read, modified,
  // written back); any other is refused.
  if (std::optional<bson_iter_t> own = Find(doc, rule_.into)) {
    if (!copy || !(Boxed(*own) == *copy)) return WritesTheCopy(rule_);
    return std::nullopt;  // stored as sent
  }
  if (!copy) return std::nullopt;
  out = WithCopy(doc, rule_.into, copy);
  return std::nullopt;
}

// What one update statement (or findAndModify) asks of the rule.
struct StatementNeeds {
  std::optional<Doc> set;        // {v: reference} a $set or a replacement writes
  std::optional<Doc> on_insert;  // {v: reference} an upsert inserts ($setOnInsert, or the filter)
  bool unset = false;            // the reference is removed
  std::optional<Doc> own_copy;   // {v: copy} a replacement carries

  bool any() const { return set || on_insert || unset; }
};

std::optional<Doc> PinnedHere(const ExtendedReferenceRule& rule, const bson_t* q);

// The clauses of an upsert's filter whose equalities MongoDB copies into
// the document it inserts: the top level, and the clauses of $and (and of
// an $or of one clause), recursively.
void ForEachInsertedClause(const bson_t* q, const std::function<void(const bson_t*)>& each) {
  each(q);
  for (const char* op : {"$and", "$or"}) {
    std::optional<bson_iter_t> list = Find(q, op);
    if (!list || !BSON_ITER_HOLDS_ARRAY(&*list)) continue;
    std::vector<Doc> clauses = ArrayDocuments(*list);
    if (std::string_view(op) == "$or" && clauses.size() != 1) continue;
    for (const Doc& clause : clauses) ForEachInsertedClause(clause.get(), each);
  }
}

// Why an upsert's filter would insert a reference or a copy remold does not
// write (a path into the reference, the copy itself), or nothing.
std::optional<Refusal> UpsertFilterProblem(const ExtendedReferenceRule& rule, const bson_t* q) {
  std::optional<Refusal> problem;
  ForEachInsertedClause(q, [&](const bson_t* clause) {
    bson_iter_t it;
    bson_iter_init(&it, clause);
    while (!problem && bson_iter_next(&it)) {
      const std::string_view key = bson_iter_key(&it);
      if (FirstComponent(key) == rule.into) problem = WritesTheCopy(rule);
      else if (FirstComponent(key) == rule.reference && key != rule.reference)
        problem = Refusal{error_codes::kInvalidOptions,
                          rule.Who() + ": an upsert whose filter names '" + std::string(key) +
                              "' would insert a reference remold cannot copy; name '" + rule.reference +
                              "' itself"};
    }
  });
  return problem;
}

// {reference: v} or {reference: {$eq: v}} in an upsert's filter (at the
// top, or in a clause MongoDB copies into the inserted document).
std::optional<Doc> PinnedReference(const ExtendedReferenceRule& rule, const bson_t* q) {
  std::optional<Doc> pinned;
  ForEachInsertedClause(q, [&](const bson_t* clause) {
    if (!pinned) pinned = PinnedHere(rule, clause);
  });
  return pinned;
}

std::optional<Doc> PinnedHere(const ExtendedReferenceRule& rule, const bson_t* q) {
  std::optional<bson_iter_t> value = Find(q, rule.reference);
  if (!value) return std::nullopt;
  if (BSON_ITER_HOLDS_DOCUMENT(&*value)) {
    std::optional<Doc> inner = FindDocument(q, rule.reference);
    bson_iter_t it;
    if (bson_iter_init(&it, inner->get()) && bson_iter_next(&it) && std::string_view(bson_iter_key(&it)) == "$eq")
      return Boxed(it);
    return std::nullopt;
  }
  return Boxed(*value);
}

// Reads what `update` (with filter `q`) does to the reference and the copy,
// or why it is refused.
std::optional<Refusal> Classify(const ExtendedReferenceRule& rule, const bson_t* q, const ClientUpdate& update,
                                bool upsert, StatementNeeds& needs) {
  const std::string& ref = rule.reference;
  if (update.pipeline)
    return Refusal{error_codes::kInvalidOptions,
                   rule.Who() + ": pipeline updates are not supported: they may change '" + ref + "' or '" +
                       rule.into + "'; use update operators or a replacement"};
  if (update.is_replacement()) {
    if (auto v = Find(update.u.get(), ref)) {
      if (BSON_ITER_HOLDS_ARRAY(&*v)) return NotOneReference(rule);
      needs.set = Boxed(*v);
    } else {
      needs.unset = true;
    }
    if (auto own = Find(update.u.get(), rule.into)) needs.own_copy = Boxed(*own);
    return std::nullopt;
  }
  bson_iter_t op;
  bson_iter_init(&op, update.u.get());
  while (bson_iter_next(&op)) {
    const std::string name = bson_iter_key(&op);
    if (!BSON_ITER_HOLDS_DOCUMENT(&op)) continue;  // the backend explains
    bson_iter_t field;
    bson_iter_recurse(&op, &field);
    while (bson_iter_next(&field)) {
      std::vector<std::string> paths = {bson_iter_key(&field)};
      if (name == "$rename" && BSON_ITER_HOLDS_UTF8(&field)) paths.push_back(bson_iter_utf8(&field, nullptr));
      for (const std::string& path : paths) {
        if (FirstComponent(path) == rule.into) return WritesTheCopy(rule);
        if (FirstComponent(path) != ref) continue;
        if (path == ref && name == "$set") {
          if (BSON_ITER_HOLDS_ARRAY(&field)) return NotOneReference(rule);
          needs.set = Boxed(field);
        } else if (path == ref && name == "$setOnInsert") {
          if (BSON_ITER_HOLDS_ARRAY(&field)) return NotOneReference(rule);
          needs.on_insert = Boxed(field);
        } else if (path == ref && name == "$unset") {
          needs.unset = true;
        } else {
          return Refusal{error_codes::kInvalidOptions,
                         rule.Who() + ": " + name + " of '" + path +
                             "' is not supported: remold copies the document '" + ref +
                             "' refers to when it is set; use $set or $unset of '" + ref + "'"};
        }
      }
    }
  }
  if (upsert) {
    if (auto refusal = UpsertFilterProblem(rule, q)) return refusal;
    if (!needs.set && !needs.on_insert && !needs.unset) {
      needs.on_insert = PinnedReference(rule, q);
      // An equality to an array inserts the array, as an insert of it would.
      if (needs.on_insert) {
        bson_iter_t pinned = Unboxed(*needs.on_insert);
        if (BSON_ITER_HOLDS_ARRAY(&pinned)) return NotOneReference(rule);
      }
    }
  }
  return std::nullopt;
}

// The references a statement needs copies of.
void CollectReferences(const StatementNeeds& needs, std::vector<Doc>& refs, std::set<std::string>& seen) {
  for (const std::optional<Doc>* box : {&needs.set, &needs.on_insert}) {
    if (!*box) continue;
    bson_iter_t v = Unboxed(**box);
    if (BSON_ITER_HOLDS_NULL(&v) || BSON_ITER_HOLDS_UNDEFINED(&v)) continue;
    if (seen.insert(KeyOf(v)).second) refs.push_back(**box);
  }
}

// {v: copy} for a reference ({v: value}): nullopt with `refusal` set when
// it names no document and the rule refuses that; {v: null}-less nullopt
// (refusal empty) for a null reference, which gets no copy.
std::optional<Doc> CopyOfReference(const ExtendedReferenceRule& rule, const Doc& reference, const CopyTable* table,
                                   std::optional<Refusal>& refusal) {
  bson_iter_t v = Unboxed(reference);
  if (BSON_ITER_HOLDS_NULL(&v) || BSON_ITER_HOLDS_UNDEFINED(&v)) return std::nullopt;
  std::optional<Doc> copy = table ? table->For(v) : std::nullopt;
  if (!copy) refusal = MissingReference(rule, v);
  return copy;
}

// Appends `field: value` to the operator document `op` of `u`, creating it.
Doc WithOperator(const Doc& u, const std::string& op, const std::string& field, const bson_iter_t& value) {
  Doc out;
  bool done = false;
  bson_iter_t it;
  bson_iter_init(&it, u.get());
  while (bson_iter_next(&it)) {
    if (std::string_view(bson_iter_key(&it)) == op && BSON_ITER_HOLDS_DOCUMENT(&it)) {
      Doc inner = *FindDocument(u.get(), op);
      AppendValue(inner.mut(), field, value);
      AppendDoc(out.mut(), op, inner);
      done = true;
    } else {
      AppendValue(out.mut(), bson_iter_key(&it), it);
    }
  }
  if (!done) {
    Doc inner;
    AppendValue(inner.mut(), field, value);
    AppendDoc(out.mut(), op, inner);
  }
  return out;
}

// The update as sent: with the copy set, set on insert or unset. Copies
// written are told to `check` (synced mode).
std::optional<Refusal> Augment(const ExtendedReferenceRule& rule, const StatementNeeds& needs, const CopyTable* table,
                               const ClientUpdate& update, Doc& out, CopyCheck* check) {
  std::optional<Refusal> refusal;
  if (update.is_replacement()) {
    std::optional<Doc> copy;
    if (needs.set) copy = CopyOfReference(rule, *needs.set, table, refusal);
    if (refusal) return refusal;
    if (needs.own_copy) {
      std::optional<Doc> own_id;
      if (auto own = FindDocument(needs.own_copy->get(), "v"))
        if (auto id = Find(own->get(), "_id")) own_id = Boxed(*id);
      const bool same_document = needs.set && own_id && KeyOf(Unboxed(*own_id)) == KeyOf(Unboxed(*needs.set));
      // A null copy is one remold wrote while the referenced document was
      // missing; read back in synced mode, it takes the fresh copy.
      const bson_iter_t own_value = Unboxed(*needs.own_copy);
      const bool synced_null = rule.mode == ExtendedReferenceRule::Mode::kSynced && BSON_ITER_HOLDS_NULL(&own_value);
      if (!same_document && !synced_null && (!copy || !(*copy == *needs.own_copy))) return WritesTheCopy(rule);
      if (rule.mode == ExtendedReferenceRule::Mode::kFrozen) {
        // A copy read and written back (a copy of the same document) is
        // kept: a frozen copy stays the one taken when the document was
        // written.
        out = update.u;
        return std::nullopt;
      }
      // Synced: the copy is the referenced document as it is now, whatever
      // the replacement read.
    }
    out = WithCopy(update.u.get(), rule.into, copy);
    if (copy && check) check->Wrote(Unboxed(*needs.set), *copy);
    return std::nullopt;
  }
  out = update.u;
  Doc empty;
  BSON_APPEND_UTF8(empty.mut(), "v", "");
  if (needs.set) {
    std::optional<Doc> copy = CopyOfReference(rule, *needs.set, table, refusal);
    if (refusal) return refusal;
    if (copy) {
      out = WithOperator(out, "$set", rule.into, Unboxed(*copy));
      if (check) check->Wrote(Unboxed(*needs.set), *copy);
    } else {
      out = WithOperator(out, "$unset", rule.into, Unboxed(empty));  // a null reference: no copy
    }
  } else if (needs.unset) {
    out = WithOperator(out, "$unset", rule.into, Unboxed(empty));
  }
  if (needs.on_insert) {
    std::optional<Doc> copy = CopyOfReference(rule, *needs.on_insert, table, refusal);
    if (refusal) return refusal;
    if (copy) {
      out = WithOperator(out, "$setOnInsert", rule.into, Unboxed(*copy));
      if (check) check->Wrote(Unboxed(*needs.on_insert), *copy);
    }
  }
  return std::nullopt;
}

// The state of one rewritten update or findAndModify.
struct ReferencingWrite {
  ReferencingWrite(const ExtendedReferenceRule& rule, const Command& client)
      : rule(rule), client(client), queue(std::make_shared<CommandQueue>()) {
    if (rule.mode == ExtendedReferenceRule::Mode::kSynced)
      check.emplace(rule, FollowerContext{this->client, &warnings, [this](const Doc& error) {
                                            failure = error;
                                            queue->Clear();
                                          },
                                          &notices});
  }
  ExtendedReferenceRule rule;
  Command client;
  std::shared_ptr<CommandQueue> queue;
  std::optional<CopyCheck> check;
  std::vector<std::string> warnings;
  std::vector<std::string> notices;
  std::optional<Doc> reply;    // the backend's reply to the client's write
  std::optional<Doc> failure;  // the reply the client gets instead
};

// Runs `write` (the client's command with its statements rewritten by
// `rewrite` from the pre-read's copies) and passes its reply on.
std::optional<Plan> RunPrepared(std::shared_ptr<ReferencingWrite> state, std::vector<Doc> refs,
                                std::function<std::optional<Refusal>(const CopyTable*, CopyCheck*, Doc&)> rewrite) {
  ReferencingWrite* w = state.get();
  auto send = [w, rewrite](const CopyTable* table) {
    Doc body;
    if (auto refusal = rewrite(table, w->check ? &*w->check : nullptr, body)) {
      w->failure = ErrorReply(*refusal);
      return;
    }
    BackendCommand write;
    write.body = std::move(body);
    write.may_fail = true;
    w->queue->Push(std::move(write), [w](const Doc& reply) {
      w->reply = reply;
      if (!IsOkReply(reply)) w->queue->Clear();  // nothing was written
    });
  };
  if (refs.empty()) {
    Doc body;
    if (auto refusal = rewrite(nullptr, nullptr, body)) return ImmediateReply(ErrorReply(*refusal));
    send(nullptr);
  } else {
    w->queue->Push(ReadReferenced(w->rule, refs, w->client), [w, send](const Doc& reply) {
      if (!IsOkReply(reply)) {
        w->failure = reply;
        return;
      }
      CopyTable table(w->rule, reply);
      send(&table);
    });
  }
  if (w->check) w->queue->AddPhase([w] { if (w->reply && IsOkReply(*w->reply)) w->check->Schedule(*w->queue); });
  Plan plan;
  w->queue->Install(plan);
  if (!refs.empty())
    plan.follow_ups.push_back("send the client's command with the copies set beside the reference (command 1 "
                              "read the documents it references)");
  if (w->check) plan.follow_ups.push_back(SyncCheckLine(w->rule));
  plan.shape = [state](std::span<const Doc>) {
    ShapedReply shaped;
    shaped.reply = state->failure ? *state->failure : state->reply.value_or(Doc());
    shaped.warnings = state->warnings;
    shaped.notices = state->notices;
    return shaped;
  };
  return plan;
}

}  // namespace

std::optional<Plan> ReferencingInsert(const Command& command, const ExtendedReferenceRule& rule) {
  return FollowedInsert(command, std::make_shared<const ReferencingSource>(rule));
}

std::optional<Plan> ReferencingUpdate(const Command& command, const ExtendedReferenceRule& rule) {
  std::optional<bson_iter_t> updates = Find(command.body.get(), "updates");
  if (!updates || !BSON_ITER_HOLDS_ARRAY(&*updates)) return std::nullopt;  // the backend explains
  std::vector<Doc> statements = ArrayDocuments(*updates);
  auto needs = std::make_shared<std::vector<StatementNeeds>>(statements.size());
  std::vector<Doc> refs;
  std::set<std::string> seen;
  bool any = false;
  std::vector<StatementRefusal> refused;  // each statement refused on its own (refused_statements.h)
  for (size_t i = 0; i < statements.size(); ++i) {
    auto u = Find(statements[i].get(), "u");
    if (!u) return std::nullopt;
    Doc q = FindDocument(statements[i].get(), "q").value_or(Doc());
    const bool upsert = FindBool(statements[i].get(), "upsert").value_or(false);
    if (auto refusal = Classify(rule, q.get(), ClientUpdateOf(*u), upsert, (*needs)[i])) {
      refused.push_back({i, *refusal});
      continue;
    }
    any = any || (*needs)[i].any() || (*needs)[i].own_copy;
    CollectReferences((*needs)[i], refs, seen);
  }
  if (!refused.empty())
    return WithRefusedStatements(command, "updates", std::move(refused),
                                 [&rule](const Command& rest) { return ReferencingUpdate(rest, rule); });
  if (!any) return std::nullopt;
  auto state = std::make_shared<ReferencingWrite>(rule, command);
  const Command client = command;
  return RunPrepared(state, std::move(refs),
                     [rule, client, statements, needs](const CopyTable* table, CopyCheck* check, Doc& body) -> std::optional<Refusal> {
                       std::vector<Doc> rewritten;
                       for (size_t i = 0; i < statements.size(); ++i) {
                         ClientUpdate update = ClientUpdateOf(*Find(statements[i].get(), "u"));
                         Doc u;
                         if (auto refusal = Augment(rule, (*needs)[i], table, update, u, check)) return refusal;
                         Doc statement;
                         bson_iter_t it;
                         bson_iter_init(&it, statements[i].get());
                         while (bson_iter_next(&it)) {
                           if (std::string_view(bson_iter_key(&it)) == "u") AppendDoc(statement.mut(), "u", u);
                           else AppendValue(statement.mut(), bson_iter_key(&it), it);
                         }
                         rewritten.push_back(std::move(statement));
                       }
                       bson_copy_to_excluding_noinit(client.body.get(), body.mut(), "updates", nullptr);
                       AppendArray(body.mut(), "updates", rewritten);
                       return std::nullopt;
                     });
}

std::optional<Plan> ReferencingFindAndModify(const Command& command, const ExtendedReferenceRule& rule) {
  if (FindBool(command.body.get(), "remove").value_or(false)) return std::nullopt;
  std::optional<bson_iter_t> u = Find(command.body.get(), "update");
  if (!u) return std::nullopt;
  auto needs = std::make_shared<StatementNeeds>();
  Doc q = FindDocument(command.body.get(), "query").value_or(Doc());
  const bool upsert = FindBool(command.body.get(), "upsert").value_or(false);
  if (auto refusal = Classify(rule, q.get(), ClientUpdateOf(*u), upsert, *needs))
    return ImmediateReply(ErrorReply(*refusal));
  if (!needs->any() && !needs->own_copy) return std::nullopt;
  std::vector<Doc> refs;
  std::set<std::string> seen;
  CollectReferences(*needs, refs, seen);
  auto state = std::make_shared<ReferencingWrite>(rule, command);
  const Command client = command;
  return RunPrepared(state, std::move(refs),
                     [rule, client, needs](const CopyTable* table, CopyCheck* check, Doc& body) -> std::optional<Refusal> {
                       ClientUpdate update = ClientUpdateOf(*Find(client.body.get(), "update"));
                       Doc rewritten;
                       if (auto refusal = Augment(rule, *needs, table, update, rewritten, check)) return refusal;
                       bson_iter_t it;
                       bson_iter_init(&it, client.body.get());
                       while (bson_iter_next(&it)) {
                         if (std::string_view(bson_iter_key(&it)) == "update") AppendDoc(body.mut(), "update", rewritten);
                         else AppendValue(body.mut(), bson_iter_key(&it), it);
                       }
                       return std::nullopt;
                     });
}

}  // namespace remold
