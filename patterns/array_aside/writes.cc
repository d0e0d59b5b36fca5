#include "patterns/array_aside/writes.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "patterns/array_aside/stored_form.h"
#include "rewrite/cursor_reply.h"
#include "rewrite/filter_clauses.h"
#include "rewrite/unchanged_guard.h"

namespace remold {
namespace {

// Overflowed documents a write's filters match are stored whole in
// batches of this many, read again until none is left: at most this many
// batches. Documents with more than a batch of elements aside are rare by
// the pattern's nature.
constexpr int64_t kFoldBatch = 100;
constexpr int kMaxFoldRounds = 20;
// Documents moved aside after one write, at most; and keys read before a
// delete (the rest of their pages are left, never read).
constexpr int64_t kMoveAsideBatch = 100;
constexpr int64_t kKeysBatch = 1000;
// Rounds of kMoveAsideBatch documents moved aside after one write, at
// most (an insert of many long documents); the rest stay whole, read
// right, and are moved aside by their next write or `remold migrate`.
constexpr int kMaxMoveAsideRounds = 50;
// Page upserts per backend command, at most (PageWrites).
constexpr size_t kPagesPerCommand = 1000;
constexpr size_t kPageBytesPerCommand = 8 << 20;
// How long the pages of a retired key stay, for readers that read the
// document naming it before it was rewritten.
constexpr int64_t kRetiredForMs = 60'000;
// Where the fold's read keeps each document as stored.
constexpr const char* kStoredField = "_remold_stored";

Doc Json(const std::string& text) { return *Doc::FromJson(text); }

std::string MarkerPath(const AsideLayout& rule, std::string_view subfield) {
  return rule.marker + "." + std::string(subfield);
}

// What one plan's steps share: the client's command, the rule, and what
// the steps found.
struct Flow {
  Command client;
  std::string rule_name;
  AsideLayout rule;
  AsideWrite write;
  size_t fold_filter = 0;  // the one of write.fold_filters step 1 reads now
  int fold_rounds_left = kMaxFoldRounds;  // of the filter step 1 reads now
  int move_aside_rounds_left = kMaxMoveAsideRounds;
  std::vector<Doc> keys;  // boxed keys whose pages may be left unnamed
  std::optional<size_t> client_reply;
  std::optional<Doc> refusal;
  std::optional<Doc> pinned_id;  // {_id: ...} of the one document a write of one document writes
};
using FlowPtr = std::shared_ptr<Flow>;

FlowPtr NewFlow(const Command& client, const std::string& rule_name, const AsideLayout& rule, AsideWrite write) {
  auto f = std::make_shared<Flow>();
  f->client = client;
  f->rule_name = rule_name;
  f->rule = rule;
  f->write = std::move(write);
  return f;
}

std::string Who(const Flow& f) { return f.rule.pattern + " rule '" + f.rule_name + "' for " + f.rule.logical.full(); }

bool HasWriteErrors(const Doc& reply) { return Find(reply.get(), "writeErrors").has_value(); }

struct WriteError {
  int code = 0;
  std::string message;
};

std::optional<WriteError> FirstWriteError(const Doc& reply) {
  auto errors = Find(reply.get(), "writeErrors");
  if (!errors || !BSON_ITER_HOLDS_ARRAY(&*errors)) return std::nullopt;
  for (const Doc& error : ArrayDocuments(*errors))
    return WriteError{static_cast<int>(FindInteger(error.get(), "code").value_or(0)),
                      FindString(error.get(), "errmsg").value_or("")};
  return std::nullopt;
}

// The codes of a document larger than a BSON document may be.
bool TooLarge(int code) { return code == 10334 || code == 17419 || code == 17420 || code == 10329; }

// {<field>: {$in: [the boxed values]}}.
Doc ValuesIn(const std::string& field, const std::vector<Doc>& boxed) {
  Doc filter;
  bson_t condition, array;
  BSON_APPEND_DOCUMENT_BEGIN(filter.mut(), field.c_str(), &condition);
  BSON_APPEND_ARRAY_BEGIN(&condition, "$in", &array);
  for (size_t i = 0; i < boxed.size(); ++i) {
    bson_iter_t value = Unboxed(boxed[i]);
    AppendValue(&array, std::to_string(i), value);
  }
  bson_append_array_end(&condition, &array);
  bson_append_document_end(filter.mut(), &condition);
  return filter;
}

BackendCommand FindCommand(const Flow& f, const Namespace& ns, const Doc& filter, const std::optional<Doc>& projection,
                           int64_t limit) {
  BackendCommand read;
  bson_t* body = read.body.mut();
  AppendString(body, "find", ns.collection);
  AppendDoc(body, "filter", filter);
  if (projection) AppendDoc(body, "projection", *projection);
  BSON_APPEND_INT64(body, "limit", limit);
  BSON_APPEND_INT64(body, "batchSize", limit);
  BSON_APPEND_BOOL(body, "singleBatch", true);
  SealCommand(f.client, ArgumentTarget::kRead, ns.db, body);
  return read;
}

Step Cleanup(const FlowPtr& f);
Step MoveAsideWritten(const FlowPtr& f, const Doc& client_reply);

// Step 3: the client's write.
Step ClientWrite(const FlowPtr& f) {
  if (f->write.write.body.empty()) return Cleanup(f);  // a migration round: no client write
  // An error reply is still the client's (Shaped), but the steps after it
  // run: the keys of documents stored whole before it must be retired.
  if (f->write.pinned && f->pinned_id) {
    BackendCommand pinned = f->write.pinned(*f->pinned_id);
    pinned.may_fail = true;
    return Step{{std::move(pinned)}, [f](std::span<const Doc> replies) -> Step {
                  f->client_reply = replies.size() - 1;
                  const Doc& reply = replies.back();
                  if (IsOkReply(reply) && !HasWriteErrors(reply) && !f->write.matched(reply)) {
                    f->refusal = ErrorReply(error_codes::kWriteConflict,
                                            Who(*f) + ": the document this write selected changed before it was "
                                            "written (another write moved its '" + f->rule.array + "'); nothing was "
                                            "written, send the write again");
                    return Cleanup(f);  // the keys of what was stored whole are retired all the same
                  }
                  if (!IsOkReply(reply)) return Cleanup(f);
                  return MoveAsideWritten(f, reply);
                }};
  }
  BackendCommand write = f->write.write;
  write.may_fail = true;
  return Step{{std::move(write)}, [f](std::span<const Doc> replies) {
                f->client_reply = replies.size() - 1;
                if (!IsOkReply(replies.back())) return Cleanup(f);
                return MoveAsideWritten(f, replies.back());
              }};
}

// Step 2: the keys of the overflowed documents a delete may remove.
Step KeyRead(const FlowPtr& f) {
  if (!f->write.keys_of) return ClientWrite(f);
  Doc projection = Json("{\"" + MarkerPath(f->rule, "key") + "\": 1, \"_id\": 0}");
  BackendCommand read =
      FindCommand(*f, f->rule.logical, Beside(*f->write.keys_of, MarkedFilter(f->rule)), projection, kKeysBatch);
  if (f->write.collation) AppendDoc(read.body.mut(), "collation", *f->write.collation);
  return Step{{std::move(read)}, [f](std::span<const Doc> replies) {
                for (const Doc& document : FirstBatch(replies.back()))
                  if (auto key = MarkerKey(f->rule, document)) f->keys.push_back(std::move(*key));
                return ClientWrite(f);
              }};
}

// Step 1: the read of the overflowed documents one of the filters
// (f.fold_filter) matches, through the view, each with itself as stored.
// One filter a read: the statements' filters are never joined in one $or,
// which an engine may turn into an $in that matches otherwise (DocumentDB
// finds nothing for {$in: [null, "c"]} on a path through an array of
// documents that {"a.4": null} alone matches).
BackendCommand FoldRead(const Flow& f) {
  const Doc& filter = f.write.fold_filters[f.fold_filter];
  std::vector<Doc> clauses, kept;
  TopLevelClauses(filter.get(), clauses);
  for (Doc& clause : clauses) {
    std::string_view key = FirstKey(clause.get());
    std::string_view first = key.substr(0, key.find('.'));
    if (key.empty() || key[0] == '$' || first == f.rule.array || first == f.rule.marker) continue;
    kept.push_back(std::move(clause));
  }
  const bool selects = !kept.empty();
  const Doc selecting = JoinClauses(std::move(kept));
  std::vector<Doc> pipeline;
  Doc match = MarkedFilter(f.rule);
  if (f.write.pinned) {
    // The one document the filter selects, in either form: those it
    // selects as stored, and every overflowed one.
    if (filter.empty()) {
      match = Doc();
    } else if (Beside(filter, Doc()) == selecting) {
      match = filter;  // it names no part of the array: it selects the same stored
    } else {
      Doc either;
      AppendArray(either.mut(), "$or", {filter, MarkedFilter(f.rule)});
      match = Beside(selecting, either);
    }
  } else if (selects) {
    match = Beside(selecting, match);
  }
  if (!match.empty()) pipeline.push_back(Stage("$match", match));
  pipeline.push_back(Json(std::string(R"({"$addFields": {")") + kStoredField + R"(": "$$ROOT"}})"));
  for (Doc& stage : AsideViewStages(f.rule)) pipeline.push_back(std::move(stage));
  if (!filter.empty()) pipeline.push_back(Stage("$match", filter));
  if (f.write.pinned && f.write.sort && !f.write.sort->empty()) pipeline.push_back(Stage("$sort", *f.write.sort));
  Doc limit;
  BSON_APPEND_INT64(limit.mut(), "$limit", f.write.pinned ? 1 : kFoldBatch);
  pipeline.push_back(std::move(limit));
  BackendCommand read;
  bson_t* body = read.body.mut();
  AppendString(body, "aggregate", f.rule.logical.collection);
  AppendArray(body, "pipeline", pipeline);
  Doc cursor;
  BSON_APPEND_INT64(cursor.mut(), "batchSize", kFoldBatch);
  AppendDoc(body, "cursor", cursor);
  if (f.write.collation) AppendDoc(body, "collation", *f.write.collation);
  // The client's variables: its filters may name them ($$name in $expr).
  if (auto let = Find(f.client.body.get(), "let")) AppendValue(body, "let", *let);
  SealCommand(f.client, ArgumentTarget::kRead, f.rule.logical.db, body);
  return read;
}

Step Fold(const FlowPtr& f) {
  if (f->write.fold_filters.empty()) return KeyRead(f);
  return Step{{FoldRead(*f)}, [f](std::span<const Doc> replies) -> Step {
                std::vector<Doc> statements;
                f->pinned_id.reset();
                for (const Doc& whole : FirstBatch(replies.back())) {
                  std::optional<Doc> stored = FindDocument(whole.get(), kStoredField);
                  if (!stored) continue;
                  if (f->write.pinned) {
                    auto id = Find(stored->get(), "_id");
                    if (!id) continue;
                    Doc pinned;
                    AppendValue(pinned.mut(), "_id", *id);
                    f->pinned_id = std::move(pinned);
                  }
                  std::optional<Doc> key = MarkerKey(f->rule, *stored);
                  if (!key) continue;  // whole already (one document's read finds either form)
                  f->keys.push_back(std::move(*key));
                  Doc document;
                  bson_copy_to_excluding_noinit(whole.get(), document.mut(), kStoredField, nullptr);
                  Doc statement;
                  AppendDoc(statement.mut(), "q", UnchangedAside(f->rule, *stored));
                  AppendDoc(statement.mut(), "u", document);
                  statements.push_back(std::move(statement));
                }
                if (statements.empty()) {
                  if (++f->fold_filter == f->write.fold_filters.size()) return KeyRead(f);
                  f->fold_rounds_left = kMaxFoldRounds;
                  return Fold(f);
                }
                if (--f->fold_rounds_left <= 0) {
                  f->refusal = ErrorReply(
                      error_codes::kConflictingOperationInProgress,
                      Who(*f) + ": the overflowed documents this write matches, which it stores whole first, were "
                      "not all stored whole in " + std::to_string(kMaxFoldRounds) + " rounds of " +
                      std::to_string(kFoldBatch) + " (more of them, or some that keep changing); those stored whole "
                      "stay so, the write did not run: send it again");
                  return Cleanup(f);
                }
                BackendCommand update = UpdateCommand(f->client, ArgumentTarget::kPreparatoryWrite, f->rule.logical,
                                                      false, std::move(statements));
                return Step{{std::move(update)}, [f](std::span<const Doc> replies) -> Step {
                              if (auto error = FirstWriteError(replies.back())) {
                                if (TooLarge(error->code))
                                  f->refusal = ErrorReply(
                                      error_codes::kBSONObjectTooLarge,
                                      Who(*f) + ": this write needs the whole '" + f->rule.array +
                                          "' of a document whose overflow is stored aside in one document, and it "
                                          "is larger than a document may be (" + error->message + "); a document "
                                          "that large takes a $push by _id, reads that leave the array out, and "
                                          "deletes not filtering on the array; the write did not run");
                                else
                                  f->refusal = ErrorReply(error->code, "",
                                                          Who(*f) + ": storing a document whole before this write "
                                                          "failed (" + error->message + "); the write did not run");
                                return Cleanup(f);
                              }
                              return Fold(f);
                            }};
              }};
}

// Step 5: keys no document names any more are retired, and the pages of
// keys retired more than kRetiredFor ago are deleted. A reader that read a
// document naming a key just before a write stored it whole still finds
// its pages (a key names one state of one document: it is never named
// again once retired).
Step SweepRetired(const FlowPtr& f);
Step DeletePages(const FlowPtr& f, const std::vector<Doc>& keys, const std::vector<Doc>& ids);

Step Cleanup(const FlowPtr& f) {
  if (f->keys.empty()) return Step{};
  BackendCommand alive = FindCommand(*f, f->rule.logical, ValuesIn(MarkerPath(f->rule, "key"), f->keys),
                                     Json("{\"" + MarkerPath(f->rule, "key") + "\": 1, \"_id\": 0}"), kKeysBatch);
  alive.may_fail = true;
  return Step{{std::move(alive)}, [f](std::span<const Doc> replies) -> Step {
                if (!IsOkReply(replies.back())) return Step{};
                std::vector<Doc> named;
                for (const Doc& document : FirstBatch(replies.back()))
                  if (auto key = MarkerKey(f->rule, document)) named.push_back(std::move(*key));
                std::vector<Doc> retire;
                for (const Doc& key : f->keys) {
                  if (std::find(named.begin(), named.end(), key) != named.end()) continue;
                  Doc id, statement, update, set, now;
                  AppendValue(id.mut(), "retired", Unboxed(key));
                  Doc q;
                  AppendDoc(q.mut(), "_id", id);
                  BSON_APPEND_BOOL(set.mut(), "parent", false);
                  // Found by no key (a $lookup of an unmarked document's
                  // missing key matches a missing field).
                  if (f->rule.one_per_document) BSON_APPEND_BOOL(set.mut(), "key", false);
                  AppendValue(set.mut(), "retired", Unboxed(key));
                  BSON_APPEND_BOOL(now.mut(), "at", true);
                  AppendDoc(update.mut(), "$set", set);
                  AppendDoc(update.mut(), "$currentDate", now);
                  AppendDoc(statement.mut(), "q", q);
                  AppendDoc(statement.mut(), "u", update);
                  BSON_APPEND_BOOL(statement.mut(), "upsert", true);
                  retire.push_back(std::move(statement));
                }
                if (retire.empty()) return Step{};
                BackendCommand write = UpdateCommand(f->client, ArgumentTarget::kPreparatoryWrite, f->rule.aside,
                                                     false, std::move(retire));
                write.may_fail = true;
                return Step{{std::move(write)}, [f](std::span<const Doc>) { return SweepRetired(f); }};
              }};
}

Step SweepRetired(const FlowPtr& f) {
  BackendCommand read = FindCommand(*f, f->rule.aside, Json(R"({"parent": false, "retired": {"$exists": true}})"),
                                    Json(R"({"retired": 1, "at": 1})"), kKeysBatch);
  read.may_fail = true;
  return Step{{std::move(read)}, [f](std::span<const Doc> replies) -> Step {
                if (!IsOkReply(replies.back())) return Step{};
                // The backend's clock: the latest retirement is this write's.
                const std::vector<Doc> retired = FirstBatch(replies.back());
                int64_t latest = INT64_MIN;
                for (const Doc& r : retired)
                  if (auto at = Find(r.get(), "at"); at && BSON_ITER_HOLDS_DATE_TIME(&*at))
                    latest = std::max(latest, bson_iter_date_time(&*at));
                std::vector<Doc> keys, ids;
                for (const Doc& r : retired) {
                  auto at = Find(r.get(), "at");
                  auto key = Find(r.get(), "retired");
                  if (!at || !BSON_ITER_HOLDS_DATE_TIME(&*at) || !key) continue;
                  if (bson_iter_date_time(&*at) > latest - kRetiredForMs) continue;
                  keys.push_back(Boxed(*key));
                  if (auto id = Find(r.get(), "_id")) ids.push_back(Boxed(*id));
                }
                if (keys.empty()) return Step{};
                // A key is derived from a document's state and the command
                // that wrote it: named again (the same state written again
                // by the same command), its pages stay.
                BackendCommand named = FindCommand(*f, f->rule.logical, ValuesIn(MarkerPath(f->rule, "key"), keys),
                                                   Json("{\"" + MarkerPath(f->rule, "key") + "\": 1, \"_id\": 0}"), kKeysBatch);
                named.may_fail = true;
                return Step{{std::move(named)}, [f, keys, ids](std::span<const Doc> replies) -> Step {
                  if (!IsOkReply(replies.back())) return Step{};
                  std::vector<Doc> again;
                  for (const Doc& document : FirstBatch(replies.back()))
                    if (auto key = MarkerKey(f->rule, document)) again.push_back(std::move(*key));
                  std::vector<Doc> gone, gone_ids;
                  for (size_t i = 0; i < keys.size(); ++i)
                    if (std::find(again.begin(), again.end(), keys[i]) == again.end()) {
                      gone.push_back(keys[i]);
                      if (i < ids.size()) gone_ids.push_back(ids[i]);
                    }
                  if (gone.empty()) return Step{};
                  return DeletePages(f, gone, gone_ids);
                }};
              }};
}

// The pages of `keys`, and their retirements (`ids`).
Step DeletePages(const FlowPtr& f, const std::vector<Doc>& keys, const std::vector<Doc>& ids) {
  BackendCommand remove;
  bson_t* body = remove.body.mut();
  AppendString(body, "delete", f->rule.aside.collection);
  Doc pages, markers;
  AppendDoc(pages.mut(), "q", ValuesIn(f->rule.KeyField(), keys));
  BSON_APPEND_INT32(pages.mut(), "limit", 0);
  AppendDoc(markers.mut(), "q", ValuesIn("_id", ids));
  BSON_APPEND_INT32(markers.mut(), "limit", 0);
  BSON_APPEND_BOOL(body, "ordered", true);
  SealCommand(f->client, ArgumentTarget::kPreparatoryWrite, f->rule.aside.db, body);
  remove.sequence_id = "deletes";
  remove.sequence = {std::move(pages), std::move(markers)};
  remove.may_fail = true;
  return Step{{std::move(remove)}, {}};
}

// The upserts of `pages`, in commands that every engine takes: at most
// kPagesPerCommand statements (DocumentDB's maxWriteBatchSize is 25,000)
// and about kPageBytesPerCommand each (a message may carry 48 MB). One
// document's history alone may be hundreds of thousands of pages.
std::vector<BackendCommand> PageWrites(const Flow& f, std::vector<Doc> pages) {
  std::vector<BackendCommand> commands;
  std::vector<Doc> chunk;
  size_t bytes = 0;
  auto flush = [&] {
    if (chunk.empty()) return;
    commands.push_back(UpdateCommand(f.client, ArgumentTarget::kPreparatoryWrite, f.rule.aside, false, std::move(chunk)));
    commands.back().may_fail = true;
    chunk.clear();
    bytes = 0;
  };
  for (Doc& page : pages) {
    if (chunk.size() >= kPagesPerCommand || bytes + page.bytes().size() > kPageBytesPerCommand) flush();
    bytes += page.bytes().size();
    chunk.push_back(std::move(page));
  }
  flush();
  return commands;
}

// Step 4: the documents `filter` selects that need their overflow moved
// aside: their pages first, then (if all were written) the documents.
Step MoveAsideStep(const FlowPtr& f, const Doc& filter) {
  BackendCommand read = FindCommand(*f, f->rule.logical, Beside(filter, NeedsMovingAsideFilter(f->rule)), std::nullopt,
                                    kMoveAsideBatch);
  read.may_fail = true;
  return Step{{std::move(read)}, [f, filter](std::span<const Doc> replies) -> Step {
                if (!IsOkReply(replies.back())) return Cleanup(f);
                std::vector<Doc> pages, documents;
                for (const Doc& stored : FirstBatch(replies.back())) {
                  MoveAside moved = MovedAside(f->rule, stored, f->client.body.bytes());
                  if (!moved.document) continue;
                  // A new key: if the guarded update of the document loses a
                  // race, no document names it, and the cleanup retires it.
                  if (!MarkerKey(f->rule, stored))
                    if (auto key = FindPath(moved.document->get(), "u." + MarkerPath(f->rule, "key")))
                      f->keys.push_back(Boxed(*key));
                  for (Doc& page : moved.pages) pages.push_back(std::move(page));
                  documents.push_back(std::move(*moved.document));
                }
                if (documents.empty()) return Cleanup(f);
                const bool more = static_cast<int64_t>(FirstBatch(replies.back()).size()) >= kMoveAsideBatch &&
                                  --f->move_aside_rounds_left > 0;
                BackendCommand store = UpdateCommand(f->client, ArgumentTarget::kPreparatoryWrite, f->rule.logical,
                                                     false, std::move(documents));
                store.may_fail = true;
                // A full batch: the next one (those stored above no longer match).
                Continuation then_cleanup = [f, filter, more](std::span<const Doc>) {
                  return more ? MoveAsideStep(f, filter) : Cleanup(f);
                };
                if (pages.empty()) return Step{{std::move(store)}, then_cleanup};
                std::vector<BackendCommand> write_pages = PageWrites(*f, std::move(pages));
                const size_t sent = write_pages.size();
                return Step{std::move(write_pages),
                            [f, sent, store = std::move(store), then_cleanup](std::span<const Doc> replies) -> Step {
                              // A document must never name a page that is not written.
                              for (const Doc& reply : replies.last(sent))
                                if (!IsOkReply(reply) || HasWriteErrors(reply)) return Cleanup(f);
                              return Step{{store}, then_cleanup};
                            }};
              }};
}

Step MoveAsideWritten(const FlowPtr& f, const Doc& client_reply) {
  if (f->rule.to_flat) return Cleanup(f);  // on the way out: documents stay whole
  std::optional<Doc> filter = f->write.written ? f->write.written(client_reply) : std::nullopt;
  // A write of one document wrote the one it was pinned to.
  if (f->pinned_id && (!filter || filter->empty())) filter = *f->pinned_id;
  if (!filter) return Cleanup(f);
  return MoveAsideStep(f, *filter);
}

ShapedReply Shaped(const FlowPtr& f, std::span<const Doc> replies) {
  if (f->refusal) return ShapedReply{*f->refusal, {}, {}, {}, {}, {}};
  if (f->client_reply && *f->client_reply < replies.size()) return ShapedReply{replies[*f->client_reply], {}, {}, {}, {}, {}};
  return ShapedReply{replies.back(), {}, {}, {}, {}, {}};
}

Plan FromStep(const FlowPtr& f, Step first) {
  Plan plan;
  plan.rule = f->rule_name;
  plan.commands = std::move(first.commands);
  plan.then = std::move(first.then);
  plan.shape = [f](std::span<const Doc> replies) { return Shaped(f, replies); };
  return plan;
}

}  // namespace

Doc WithField(const Doc& statement, std::string_view key, const bson_iter_t& value) {
  Doc out;
  bool placed = false;
  bson_iter_t it;
  bson_iter_init(&it, statement.get());
  while (bson_iter_next(&it)) {
    if (key == bson_iter_key(&it)) {
      AppendValue(out.mut(), key, value);
      placed = true;
    } else {
      AppendValue(out.mut(), bson_iter_key(&it), it);
    }
  }
  if (!placed) AppendValue(out.mut(), key, value);
  return out;
}

Doc WithDocument(const Doc& statement, std::string_view key, const Doc& value) {
  Doc boxed;
  AppendDoc(boxed.mut(), "v", value);
  return WithField(statement, key, Unboxed(boxed));
}

Doc Beside(const Doc& filter, const Doc& more) {
  std::vector<Doc> all;
  TopLevelClauses(filter.get(), all);
  TopLevelClauses(more.get(), all);
  return JoinClauses(std::move(all));
}

Plan AsideWritePlan(const Command& client, const std::string& rule_name, const AsideLayout& rule, AsideWrite write) {
  auto f = NewFlow(client, rule_name, rule, std::move(write));
  Plan plan = FromStep(f, Fold(f));
  plan.follow_ups = {"the marked documents the write matches are stored whole first, each as read",
                     "documents left with more than " + std::to_string(rule.first) +
                         " elements have the rest moved to " + rule.aside.full(),
                     "pages no document names any more are deleted"};
  return plan;
}

Plan AsideAppendPlan(const Command& client, const std::string& rule_name, const AsideLayout& rule,
                     const Doc& statement, const Doc& filter, const Doc& tail_update, int64_t pushed) {
  AsideWrite write;
  auto f = NewFlow(client, rule_name, rule, std::move(write));
  // The read says the form, and whether the push will leave the document
  // to move aside (its array, or its tail, long enough): without that,
  // nothing follows the push. An aggregate: a find's projection cannot
  // count an array on every engine.
  const std::string m = rule.marker;
  const std::string a = JsonQuote("$" + rule.array);
  std::vector<Doc> pipeline{Stage("$match", filter), Json(R"({"$limit": 1})"),
                            Json(R"({"$project": {"_id": 0, "key": "$)" + m + R"(.key", "n": {"$size": {"$cond": [{"$isArray": )" +
                                 a + "}, " + a + R"(, []]}}, "tail": {"$size": {"$ifNull": ["$)" + m + R"(.tail", []]}}}})")};
  BackendCommand read;
  bson_t* body = read.body.mut();
  AppendString(body, "aggregate", rule.logical.collection);
  AppendArray(body, "pipeline", pipeline);
  AppendDoc(body, "cursor", Doc());
  if (auto collation = Find(statement.get(), "collation")) AppendValue(body, "collation", *collation);
  SealCommand(f->client, ArgumentTarget::kRead, rule.logical.db, body);
  Plan plan = FromStep(f, Step{{std::move(read)}, [f, statement, filter, tail_update, pushed](std::span<const Doc> replies) {
    const std::vector<Doc> found = FirstBatch(replies.back());
    std::optional<Doc> key;
    if (!found.empty())
      if (auto k = Find(found.front().get(), "key")) key = Boxed(*k);
    // Counts as the backend gave them, bounded (a document holds far fewer).
    auto count = [&](const char* field) {
      return found.empty() ? int64_t{0}
                           : std::clamp<int64_t>(FindInteger(found.front().get(), field).value_or(0), 0, INT32_MAX);
    };
    const int64_t embedded = count("n");
    const int64_t tail = count("tail");
    const bool moves_aside = !f->rule.to_flat && (key ? tail + pushed >= f->rule.page
                                                      : found.empty() || embedded + pushed > f->rule.first);
    Doc sent;
    if (key) {
      Doc pinned;
      AppendValue(pinned.mut(), MarkerPath(f->rule, "key"), Unboxed(*key));
      sent = WithDocument(WithDocument(statement, "q", Beside(filter, pinned)), "u", tail_update);
      Doc no;
      BSON_APPEND_BOOL(no.mut(), "v", false);
      sent = WithField(sent, "upsert", Unboxed(no));
    } else {
      sent = WithDocument(statement, "q", Beside(filter, UnmarkedFilter(f->rule)));
    }
    BackendCommand update;
    bson_copy_to_excluding_noinit(f->client.body.get(), update.body.mut(), "updates", nullptr);
    update.sequence_id = "updates";
    update.sequence = {std::move(sent)};
    const bool existed = !found.empty();
    return Step{{std::move(update)}, [f, existed, filter, moves_aside](std::span<const Doc> replies) -> Step {
                  f->client_reply = replies.size() - 1;
                  const Doc& reply = replies.back();
                  if (!IsOkReply(reply)) return Step{};
                  if (existed && FindInteger(reply.get(), "n").value_or(0) == 0 && !HasWriteErrors(reply)) {
                    f->refusal = ErrorReply(error_codes::kWriteConflict,
                                            Who(*f) + ": the document changed while the $push was sent (another "
                                            "write moved its '" + f->rule.array + "'); nothing was written, send "
                                            "the write again");
                    return Step{};
                  }
                  if (existed && !moves_aside) return Step{};
                  std::vector<Doc> id;
                  TopLevelClauses(filter.get(), id);
                  for (Doc& clause : id)
                    if (FirstKey(clause.get()) == "_id") return MoveAsideStep(f, clause);
                  return Step{};
                }};
  }});
  plan.follow_ups = {"the $push runs once, on the document's form as read: onto its tail when it is marked, as "
                     "sent otherwise",
                     "a document left with more than " + std::to_string(rule.first) +
                         " elements, or a full tail, has the rest moved to " + rule.aside.full()};
  return plan;
}

Plan AsideMigrationRound(const std::string& rule_name, const AsideLayout& rule, MigrationDirection direction) {
  // No client: the commands carry no generic arguments of one.
  const Command none{rule.logical.db, "migrate", Doc()};
  AsideWrite write;
  if (direction == MigrationDirection::kToFlat) write.fold_filters = {Doc()};
  auto f = NewFlow(none, rule_name, rule, std::move(write));
  Plan plan = FromStep(f, direction == MigrationDirection::kToFlat ? Fold(f) : MoveAsideStep(f, Doc()));
  plan.follow_ups = {direction == MigrationDirection::kToFlat
                         ? "overflowed documents stored whole, a batch at a time, each under a guard that it is as read"
                         : "documents over the threshold have their overflow moved aside, a batch at a time"};
  return plan;
}

}  // namespace remold
