#include "patterns/versioned/rewrite.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "patterns/versioned/upgrade.h"
#include "patterns/versioned/view.h"
#include "rewrite/aggregate_pipeline.h"
#include "rewrite/count_reply.h"
#include "rewrite/cursor_reply.h"
#include "rewrite/distinct_reply.h"
#include "rewrite/filter_clauses.h"
#include "rewrite/find_as_aggregate.h"
#include "rewrite/one_document_delete.h"
#include "rewrite/unchanged_guard.h"

namespace remold {
namespace {

// Older documents a write's filters match are upgraded in batches of this
// many, read again until none is left: at most this many batches.
constexpr int64_t kUpgradeBatch = 1'000;
constexpr int kMaxUpgradeRounds = 100;
// Where the prelude's read keeps each document as stored while the view
// upgrades it (a name no application uses: remold's prefix).
constexpr const char* kStoredField = "_remold_stored";

std::string FirstComponent(std::string_view path) { return std::string(path.substr(0, path.find('.'))); }

Doc Json(const std::string& text) { return *Doc::FromJson(text); }

Doc And(std::vector<Doc> clauses) {
  std::erase_if(clauses, [](const Doc& clause) { return clause.empty(); });
  if (clauses.empty()) return Doc();
  if (clauses.size() == 1) return std::move(clauses.front());
  Doc out;
  AppendArray(out.mut(), "$and", clauses);
  return out;
}

Doc Or(std::vector<Doc> clauses) {
  if (clauses.size() == 1) return std::move(clauses.front());
  Doc out;
  AppendArray(out.mut(), "$or", clauses);
  return out;
}

// The documents of a cursor reply's first or next batch.
std::vector<Doc> BatchDocuments(const Doc& reply) {
  auto cursor = FindDocument(reply.get(), "cursor");
  if (!cursor) return {};
  for (const char* key : {"firstBatch", "nextBatch"}) {
    if (auto batch = Find(cursor->get(), key); batch && BSON_ITER_HOLDS_ARRAY(&*batch)) return ArrayDocuments(*batch);
  }
  return {};
}

// The guarded replacements that store upgraded the documents of a read's
// reply (those that upgrade; none when nothing does).
std::vector<BackendCommand> UpgradeWrites(const Command& command, const VersionedRule& rule, const Doc& read_reply,
                                          bool may_fail) {
  std::vector<Doc> statements;
  for (const Doc& stored : BatchDocuments(read_reply)) {
    UpgradedDocument upgraded = Upgrade(rule, stored.get());
    if (!upgraded.changed()) continue;
    Doc statement;
    AppendDoc(statement.mut(), "q", UnchangedDocument(stored));
    AppendDoc(statement.mut(), "u", upgraded.document);
    BSON_APPEND_BOOL(statement.mut(), "multi", false);
    statements.push_back(std::move(statement));
  }
  if (statements.empty()) return {};
  BackendCommand update = UpdateCommand(command, ArgumentTarget::kPreparatoryWrite, rule.logical, false,
                                        std::move(statements));
  update.may_fail = may_fail;
  return {std::move(update)};
}

class VersionedRewriter {
 public:
  VersionedRewriter(const Command& command, const RuleContext& rule, const VersionedRule& versioned)
      : command_(command), rule_(rule), v_(versioned) {}

  std::optional<Plan> Rewrite() {
    const std::string& name = command_.name;
    if (name == "find") return FindCommand();
    if (name == "getMore") return GetMore();
    if (name == "aggregate") return Aggregate();
    if (name == "count") return Count();
    if (name == "distinct") return Distinct();
    if (name == "insert") return Insert();
    if (name == "update") return Update();
    if (name == "delete") return Delete();
    if (name == "findAndModify" || name == "findandmodify") return FindAndModify();
    return std::nullopt;  // everything else is about the collection as stored
  }

 private:
  Plan Refuse(ErrorCode code, const std::string& what) const {
    return ImmediateReply(ErrorReply(code, "versioned rule '" + rule_.name + "' for " + v_.logical.full() + ": " + what));
  }

  // The clauses of `filter` on fields no upgrade changes: they select the
  // same documents before the upgrade as after it.
  Doc PassingClauses(const Doc& filter) const {
    std::vector<Doc> clauses, kept;
    TopLevelClauses(filter.get(), clauses);
    for (Doc& clause : clauses) {
      bson_iter_t it;
      if (!bson_iter_init(&it, clause.get()) || !bson_iter_next(&it)) continue;
      std::string_view key = bson_iter_key(&it);
      if (key.empty() || key[0] == '$' || v_.Changes(FirstComponent(key))) continue;
      kept.push_back(std::move(clause));
    }
    return JoinClauses(std::move(kept));
  }

  // Whether the filter names only fields no upgrade changes.
  bool PassesThrough(const Doc& filter) const {
    std::vector<Doc> clauses;
    TopLevelClauses(filter.get(), clauses);
    return JoinClauses(std::move(clauses)) == PassingClauses(filter);
  }

  // `clauses` (a filter) with `more` beside them at the top, where an
  // index serves them.
  static Doc Beside(const Doc& clauses, Doc more) {
    std::vector<Doc> all;
    TopLevelClauses(clauses.get(), all);
    all.push_back(std::move(more));
    return JoinClauses(std::move(all));
  }

  // The $match before the upgrade stages for a read filtering on `filter`
  // (none when it is empty): current documents by the filter itself, older
  // ones by the clauses the upgrade keeps, which stay at the top for both:
  //   {<kept clauses>, $or: [{$and: [<not older>, <filter>]}, <older>]}
  // A filter of kept clauses only is the same before the upgrade.
  std::vector<Doc> BeforeView(const Doc& filter) const {
    if (filter.empty()) return {};
    if (PassesThrough(filter)) return {Stage("$match", filter)};
    Doc split;
    AppendArray(split.mut(), "$or", {And({Json(NotOlderFilter(v_)), filter}), Json(OlderVersionsFilter(v_))});
    return {Stage("$match", Beside(PassingClauses(filter), std::move(split)))};
  }

  // A read's aggregate: `pipeline` after the upgrade.
  BackendCommand ReadAggregate(const Doc& filter, std::vector<Doc> after) const {
    std::vector<Doc> pipeline = BeforeView(filter);
    for (Doc& stage : UpgradeStages(v_)) pipeline.push_back(std::move(stage));
    if (!filter.empty()) pipeline.push_back(Stage("$match", filter));
    for (Doc& stage : after) pipeline.push_back(std::move(stage));
    BackendCommand backend;
    bson_t* out = backend.body.mut();
    AppendString(out, "aggregate", v_.logical.collection);
    AppendArray(out, "pipeline", pipeline);
    AppendDoc(out, "cursor", Doc());
    for (const char* passthrough : {"collation", "hint"}) {
      if (auto v = Find(command_.body.get(), passthrough)) AppendValue(out, passthrough, *v);
    }
    SealCommand(command_, ArgumentTarget::kRead, v_.logical.db, out);
    return backend;
  }

  // With `write_back`: after a batch of documents went to the client, those
  // of them still stored at an older version are read and stored upgraded,
  // each under a guard that it is unchanged. The client's reply stands
  // whatever these find.
  void WithWriteBack(Plan& plan) const {
    if (!v_.write_back || InTransaction(command_)) return;
    const Command command = command_;
    const VersionedRule rule = v_;
    plan.then = [command, rule](std::span<const Doc> replies) {
      const std::vector<Doc> returned = BatchDocuments(replies.front());
      const Doc by_id = IdIn(returned);
      if (returned.empty()) return Step{};
      BackendCommand read;
      bson_t* body = read.body.mut();
      AppendString(body, "find", rule.logical.collection);
      AppendDoc(body, "filter", And({by_id, Json(OlderVersionsFilter(rule))}));
      BSON_APPEND_INT64(body, "batchSize", static_cast<int64_t>(returned.size()));
      BSON_APPEND_BOOL(body, "singleBatch", true);
      AppendString(body, "$db", rule.logical.db);
      read.may_fail = true;
      return Step{{std::move(read)}, [command, rule](std::span<const Doc> replies) {
                    return Step{UpgradeWrites(command, rule, replies.back(), true), {}};
                  }};
    };
  }

  // A find of one batch (findOne) whose filter and sort name only fields
  // no upgrade changes, without a projection: the stored documents it
  // returns are the ones to return, upgraded here (Upgrade agrees with the
  // view), and no getMore follows to see them stored.
  bool UpgradesItsReply(const Doc& filter) const {
    const bson_t* body = command_.body.get();
    const bool one_batch = FindBool(body, "singleBatch").value_or(false) || FindInteger(body, "limit").value_or(0) < 0;
    if (!one_batch || !PassesThrough(filter)) return false;
    std::optional<Doc> projection = FindDocument(body, "projection");
    if (projection && !projection->empty()) return false;
    std::optional<Doc> sort = FindDocument(body, "sort");
    return !sort || PassesThrough(*sort);
  }

  Plan FindUpgradingReply() const {
    BackendCommand backend;
    backend.body = command_.body;
    Plan plan = Forwarded(std::move(backend));
    const VersionedRule rule = v_;
    plan.shape = [rule](std::span<const Doc> replies) {
      Doc reply = RewriteCursorReply(replies.front(), [&](std::string_view key, const bson_iter_t& value, CursorOut cursor) {
        if (key != "firstBatch" || !BSON_ITER_HOLDS_ARRAY(&value)) return false;
        std::vector<Doc> documents;
        for (const Doc& stored : ArrayDocuments(value)) documents.push_back(Upgrade(rule, stored.get()).document);
        AppendArray(cursor.doc, key, documents);
        return true;
      });
      return ShapedReply{std::move(reply), {}, {}, {}, {}, {}};
    };
    if (v_.write_back && !InTransaction(command_)) {
      const Command command = command_;
      plan.then = [command, rule](std::span<const Doc> replies) {
        return Step{UpgradeWrites(command, rule, replies.front(), true), {}};
      };
    }
    return plan;
  }

  std::optional<Plan> FindCommand() const {
    const Doc filter = FindDocument(command_.body.get(), "filter").value_or(Doc());
    if (UpgradesItsReply(filter)) return FindUpgradingReply();
    FindPipeline parts;
    parts.before_view = BeforeView(filter);
    parts.view = UpgradeStages(v_);
    parts.after_view = filter;
    auto aggregate = FindAsAggregate(command_, v_.logical, std::move(parts), "on a versioned collection");
    if (auto* refusal = std::get_if<Refusal>(&aggregate)) return Refuse(refusal->code, refusal->message);
    AggregateFind& find = std::get<AggregateFind>(aggregate);
    Plan plan = Forwarded(std::move(find.command));
    if (find.single_batch) plan.shape = SingleBatchShape(v_.logical);
    WithWriteBack(plan);
    return plan;
  }

  std::optional<Plan> GetMore() const {
    if (!v_.write_back || InTransaction(command_)) return std::nullopt;
    BackendCommand backend;
    backend.body = command_.body;
    Plan plan = Forwarded(std::move(backend));
    WithWriteBack(plan);
    return plan;
  }

  std::optional<Plan> Aggregate() const {
    auto pipeline_iter = Find(command_.body.get(), "pipeline");
    if (!pipeline_iter || !BSON_ITER_HOLDS_ARRAY(&*pipeline_iter))
      return ImmediateReply(ErrorReply(error_codes::kFailedToParse, "aggregate needs a 'pipeline' array"));
    std::vector<Doc> stages = ArrayDocuments(*pipeline_iter);
    std::vector<Doc> pipeline;
    size_t i = 0;
    if (!stages.empty()) {
      std::string_view stage = FirstKey(stages[0].get());  // "": an empty stage, which the backend refuses
      // About the collection or its change events, not its documents.
      if (IsAboutTheCollection(stage)) return std::nullopt;
      // Must stay first; the documents they produce are upgraded after.
      if (MustStayFirst(stage)) {
        pipeline.push_back(stages[0]);
        i = 1;
      }
    }
    // The client's first $match, before the upgrade, selects what it can.
    if (i < stages.size()) {
      if (std::optional<Doc> match = FindDocument(stages[i].get(), "$match"))
        for (Doc& stage : BeforeView(*match)) pipeline.push_back(std::move(stage));
    }
    for (Doc& stage : UpgradeStages(v_)) pipeline.push_back(std::move(stage));
    for (; i < stages.size(); ++i) pipeline.push_back(std::move(stages[i]));
    return Forwarded(WithPipeline(command_.body.get(), pipeline));
  }

  std::optional<Plan> Count() const {
    const bson_t* body = command_.body.get();
    const Doc query = FindDocument(body, "query").value_or(Doc());
    if (PassesThrough(query)) return std::nullopt;  // the same documents match before the upgrade
    Plan plan = Forwarded(ReadAggregate(query, CountStages(body)));
    plan.shape = CountReply;
    return plan;
  }

  std::optional<Plan> Distinct() const {
    const bson_t* body = command_.body.get();
    const Doc query = FindDocument(body, "query").value_or(Doc());
    std::optional<std::string> key = FindString(body, "key");
    if (!key) return std::nullopt;  // the server says what is wrong
    if (!v_.Changes(FirstComponent(*key)) && PassesThrough(query)) return std::nullopt;
    Plan plan = Forwarded(ReadAggregate(query, DistinctStages(*key)));
    plan.shape = [](std::span<const Doc> replies) {
      if (!IsOkReply(replies.front())) return ShapedReply{replies.front(), {}, {}, {}, {}, {}};
      return ShapedReply{DistinctReply(replies), {}, {}, {}, {}, {}};
    };
    return plan;
  }

  // A document to store: with the current version when it has none; one it
  // names stays (an older writer's document, upgraded when read).
  std::optional<std::string> Stamped(const Doc& document, Doc& out) const {
    bson_iter_t it;
    if (!bson_iter_init_find(&it, document.get(), v_.field.c_str())) {
      out = document;
      BSON_APPEND_INT32(out.mut(), v_.field.c_str(), v_.current());
      return std::nullopt;
    }
    if (!VersionOf(v_, document.get()))
      return "'" + v_.field + "' must be one of the rule's versions (" + std::to_string(v_.first()) + ".." +
             std::to_string(v_.current()) + "), or missing for the current one";
    out = document;
    return std::nullopt;
  }

  std::optional<Plan> Insert() const {
    auto documents = Find(command_.body.get(), "documents");
    if (!documents || !BSON_ITER_HOLDS_ARRAY(&*documents))
      return ImmediateReply(ErrorReply(error_codes::kFailedToParse, "insert needs a 'documents' array"));
    std::vector<Doc> stamped;
    for (const Doc& document : ArrayDocuments(*documents)) {
      Doc out;
      if (auto error = Stamped(document, out)) return Refuse(error_codes::kBadValue, *error);
      stamped.push_back(std::move(out));
    }
    BackendCommand backend;
    bson_copy_to_excluding_noinit(command_.body.get(), backend.body.mut(), "documents", nullptr);
    backend.sequence_id = "documents";
    backend.sequence = std::move(stamped);
    return Forwarded(std::move(backend));
  }

  // Whether an update document changes the version field ($setOnInsert
  // aside: an upsert may say which version it inserts, StoredUpdate checks it).
  bool ChangesVersion(const Doc& u) const {
    bson_iter_t op;
    bson_iter_init(&op, u.get());
    while (bson_iter_next(&op)) {
      if (!BSON_ITER_HOLDS_DOCUMENT(&op) || std::string_view(bson_iter_key(&op)) == "$setOnInsert") continue;
      bool named = false;
      ForEachChild(op, [&](std::string_view path, const bson_iter_t& value) {
        if (FirstComponent(path) == v_.field) named = true;
        // $rename: {from: to}
        if (BSON_ITER_HOLDS_UTF8(&value) && std::string_view(bson_iter_key(&op)) == "$rename" &&
            FirstComponent(bson_iter_utf8(&value, nullptr)) == v_.field)
          named = true;
      });
      if (named) return true;
    }
    return false;
  }

  // The version `filter` says a document has, as {<field>: <value>}: an
  // equality on the version field at the top, which an upsert copies into
  // what it inserts.
  std::optional<Doc> NamedVersion(const Doc& filter) const {
    std::vector<Doc> clauses;
    TopLevelClauses(filter.get(), clauses);
    for (const Doc& clause : clauses) {
      bson_iter_t it;
      if (!bson_iter_init(&it, clause.get()) || !bson_iter_next(&it) || v_.field != bson_iter_key(&it)) continue;
      if (!BSON_ITER_HOLDS_DOCUMENT(&it)) return clause;
      std::optional<Doc> condition = FindDocument(clause.get(), v_.field);
      if (auto equal = condition ? Find(condition->get(), "$eq") : std::nullopt) {
        Doc named;
        AppendValue(named.mut(), v_.field, *equal);
        return named;
      }
    }
    return std::nullopt;
  }

  // The update document of a statement, as stored: a replacement gets the
  // version; an upsert's operators set it on insert, unless the filter or
  // the client's $setOnInsert names a version of the rule.
  std::variant<Doc, Refusal> StoredUpdate(const Doc& u, const Doc& filter, bool upsert) const {
    bson_iter_t first;
    bool operators = bson_iter_init(&first, u.get()) && bson_iter_next(&first) && bson_iter_key(&first)[0] == '$';
    if (!operators) {
      Doc out;
      if (auto error = Stamped(u, out)) return Refusal{error_codes::kBadValue, *error};
      return out;
    }
    if (ChangesVersion(u))
      return Refusal{error_codes::kInvalidOptions,
                     "an update cannot change '" + v_.field + "': remold keeps each document's version"};
    std::optional<Doc> on_insert = FindDocument(u.get(), "$setOnInsert");
    if (on_insert && Find(on_insert->get(), v_.field)) {
      Doc named;
      if (auto error = Stamped(*on_insert, named)) return Refusal{error_codes::kBadValue, *error};
    }
    const std::optional<Doc> named = upsert ? NamedVersion(filter) : std::nullopt;
    if (named && !VersionOf(v_, named->get()))
      return Refusal{error_codes::kBadValue, "an upsert's filter names '" + v_.field +
                                                 "' of a version the rule does not list (" +
                                                 std::to_string(v_.first()) + ".." + std::to_string(v_.current()) + ")"};
    if (!upsert || named || (on_insert && Find(on_insert->get(), v_.field))) return u;
    Doc out, stamped_on_insert = on_insert.value_or(Doc());
    bson_iter_t it;
    bson_iter_init(&it, u.get());
    while (bson_iter_next(&it)) {
      if (std::string_view(bson_iter_key(&it)) != "$setOnInsert") AppendValue(out.mut(), bson_iter_key(&it), it);
    }
    BSON_APPEND_INT32(stamped_on_insert.mut(), v_.field.c_str(), v_.current());
    AppendDoc(out.mut(), "$setOnInsert", stamped_on_insert);
    return out;
  }

  // A write's filter, restricted to documents not at an older version:
  // after the prelude, the older documents it should meet are upgraded, and
  // those left behind must not be met in their older shape. Left behind
  // are also those an upgrade cannot apply to, which reads return as
  // stored: writes leave them alone until they are fixed (an $expr running
  // the upgrade could tell them apart; not built: it needs the whole
  // upgrade in every write's filter).
  Doc NotOlder(const Doc& filter) const { return Beside(filter, Json(NotOlderFilter(v_))); }

  // `statement` with its filter under `key` restricted (NotOlder) and,
  // when given, its update document under `update_key` replaced.
  static Doc Restated(const Doc& statement, const char* key, const Doc& filter, const char* update_key = nullptr,
                      const Doc* update = nullptr) {
    Doc out;
    bool has_filter = false;
    bson_iter_t it;
    bson_iter_init(&it, statement.get());
    while (bson_iter_next(&it)) {
      std::string_view name = bson_iter_key(&it);
      if (name == key) {
        AppendDoc(out.mut(), key, filter);
        has_filter = true;
      } else if (update_key && name == update_key) {
        AppendDoc(out.mut(), update_key, *update);
      } else {
        AppendValue(out.mut(), name, it);
      }
    }
    if (!has_filter) AppendDoc(out.mut(), key, filter);
    return out;
  }

  // The read of the prelude: the older documents, as stored, that match one
  // of `filters` once upgraded to the current version (a batch of them; one
  // an upgrade cannot bring there is left, and the write passes it by).
  BackendCommand OlderMatchesRead(const std::vector<Doc>& filters, const std::optional<bson_iter_t>& collation) const {
    std::vector<Doc> passing;
    bool every_filter_selects = true;
    for (const Doc& filter : filters) {
      Doc clauses = PassingClauses(filter);
      every_filter_selects = every_filter_selects && !clauses.empty();
      passing.push_back(std::move(clauses));
    }
    std::vector<Doc> pipeline;
    Doc older = Json(OlderVersionsFilter(v_));
    if (!every_filter_selects) pipeline.push_back(Stage("$match", older));
    else if (passing.size() == 1) pipeline.push_back(Stage("$match", Beside(passing.front(), std::move(older))));
    else pipeline.push_back(Stage("$match", And({older, Or(passing)})));
    pipeline.push_back(Json(std::string(R"({"$replaceRoot": {"newRoot": {"$mergeObjects": ["$$ROOT", {")") +
                            kStoredField + R"(": "$$ROOT"}]}}})"));
    for (Doc& stage : UpgradeStages(v_)) pipeline.push_back(std::move(stage));
    std::vector<Doc> nonempty;
    bool matches_all = false;
    for (const Doc& filter : filters) {
      if (filter.empty()) matches_all = true;
      else nonempty.push_back(filter);
    }
    Doc upgraded;
    BSON_APPEND_INT32(upgraded.mut(), v_.field.c_str(), v_.current());
    pipeline.push_back(Stage("$match", matches_all ? upgraded : And({Or(nonempty), upgraded})));
    pipeline.push_back(Json(std::string(R"({"$replaceRoot": {"newRoot": "$)") + kStoredField + "\"}}"));
    Doc limit;
    BSON_APPEND_INT64(limit.mut(), "$limit", kUpgradeBatch);
    pipeline.push_back(std::move(limit));
    BackendCommand read;
    bson_t* body = read.body.mut();
    AppendString(body, "aggregate", v_.logical.collection);
    AppendArray(body, "pipeline", pipeline);
    Doc cursor;
    BSON_APPEND_INT64(cursor.mut(), "batchSize", kUpgradeBatch);
    AppendDoc(body, "cursor", cursor);
    if (collation) AppendValue(body, "collation", *collation);
    // The client's variables: its filters may name them ($$name in $expr).
    if (auto let = Find(command_.body.get(), "let")) AppendValue(body, "let", *let);
    SealCommand(command_, ArgumentTarget::kRead, v_.logical.db, body);
    return read;
  }

  // `plan` after the older documents `filters` match are stored upgraded;
  // refused when more are left than the prelude upgrades.
  Plan AfterUpgrading(const std::vector<Doc>& filters, const std::optional<bson_iter_t>& collation, Plan plan) const {
    const Command command = command_;
    const VersionedRule rule = v_;
    const Doc unfinished = ErrorReply(
        error_codes::kInvalidOptions,
        "versioned rule '" + rule_.name + "' for " + v_.logical.full() +
            ": the documents at older versions this write matches, which it stores upgraded first, were not "
            "all upgraded in " + std::to_string(kMaxUpgradeRounds) + " rounds of " + std::to_string(kUpgradeBatch) +
            " (more of them, or some that keep changing); those upgraded stay so, the write did not run. Run "
            "`remold migrate --rule " + rule_.name + (rule_.stacked ? " --layer versioned" : "") +
            "`, then the write again");
    return AfterPrelude(OlderMatchesRead(filters, collation),
                        [command, rule](const Doc& reply) { return UpgradeWrites(command, rule, reply, false); },
                        std::move(plan), kMaxUpgradeRounds, unfinished);
  }

  std::optional<Plan> Update() const {
    auto updates = Find(command_.body.get(), "updates");
    if (!updates || !BSON_ITER_HOLDS_ARRAY(&*updates))
      return ImmediateReply(ErrorReply(error_codes::kFailedToParse, "update needs an 'updates' array"));
    std::vector<Doc> statements, filters;
    // `collation` reads into the client's statements: they live as long as it.
    const std::vector<Doc> client_statements = ArrayDocuments(*updates);
    std::optional<bson_iter_t> collation;
    for (const Doc& statement : client_statements) {
      const Doc filter = FindDocument(statement.get(), "q").value_or(Doc());
      filters.push_back(filter);
      if (!collation) collation = Find(statement.get(), "collation");
      auto u = Find(statement.get(), "u");
      if (!u) return ImmediateReply(ErrorReply(error_codes::kFailedToParse, "update statement needs 'u'"));
      const bool upsert = FindBool(statement.get(), "upsert").value_or(false);
      if (BSON_ITER_HOLDS_ARRAY(&*u)) {
        if (upsert)
          return Refuse(error_codes::kInvalidOptions,
                        "a pipeline update with upsert is not supported (the inserted document would not get '" +
                            v_.field + "')");
        statements.push_back(OneDocumentDelete(command_, statement, Restated(statement, "q", NotOlder(filter))));
        continue;
      }
      auto stored = StoredUpdate(*FindDocument(statement.get(), "u"), filter, upsert);
      if (auto* refusal = std::get_if<Refusal>(&stored)) return Refuse(refusal->code, refusal->message);
      statements.push_back(Restated(statement, "q", NotOlder(filter), "u", &std::get<Doc>(stored)));
    }
    BackendCommand backend;
    bson_copy_to_excluding_noinit(command_.body.get(), backend.body.mut(), "updates", nullptr);
    backend.sequence_id = "updates";
    backend.sequence = std::move(statements);
    return AfterUpgrading(filters, collation, Forwarded(std::move(backend)));
  }

  std::optional<Plan> Delete() const {
    auto deletes = Find(command_.body.get(), "deletes");
    if (!deletes || !BSON_ITER_HOLDS_ARRAY(&*deletes))
      return ImmediateReply(ErrorReply(error_codes::kFailedToParse, "delete needs a 'deletes' array"));
    std::vector<Doc> filters, statements;
    // `collation` reads into the client's statements: they live as long as it.
    const std::vector<Doc> client_statements = ArrayDocuments(*deletes);
    std::optional<bson_iter_t> collation;
    for (const Doc& statement : client_statements) {
      const Doc filter = FindDocument(statement.get(), "q").value_or(Doc());
      filters.push_back(filter);
      statements.push_back(OneDocumentDelete(command_, statement, Restated(statement, "q", NotOlder(filter))));
      if (!collation) collation = Find(statement.get(), "collation");
    }
    BackendCommand backend;
    bson_copy_to_excluding_noinit(command_.body.get(), backend.body.mut(), "deletes", nullptr);
    backend.sequence_id = "deletes";
    backend.sequence = std::move(statements);
    return AfterUpgrading(filters, collation, Forwarded(std::move(backend)));
  }

  std::optional<Plan> FindAndModify() const {
    const bson_t* body = command_.body.get();
    const Doc query = FindDocument(body, "query").value_or(Doc());
    auto update = Find(body, "update");
    const bool upsert = FindBool(body, "upsert").value_or(false);
    std::optional<Doc> stored_update;
    if (update && BSON_ITER_HOLDS_DOCUMENT(&*update)) {
      auto stored = StoredUpdate(*FindDocument(body, "update"), query, upsert);
      if (auto* refusal = std::get_if<Refusal>(&stored)) return Refuse(refusal->code, refusal->message);
      stored_update = std::get<Doc>(stored);
    } else if (update && BSON_ITER_HOLDS_ARRAY(&*update) && upsert) {
      return Refuse(error_codes::kInvalidOptions,
                    "a pipeline update with upsert is not supported (the inserted document would not get '" +
                        v_.field + "')");
    }
    BackendCommand backend;
    backend.body = Restated(command_.body, "query", NotOlder(query), stored_update ? "update" : nullptr,
                            stored_update ? &*stored_update : nullptr);
    Plan plan = Forwarded(std::move(backend));
    std::optional<Doc> fields = FindDocument(body, "fields");
    if (fields && !fields->empty()) return AfterUpgrading({query}, Find(body, "collation"), std::move(plan));
    // The document returned is stored at the current version, or at the
    // one a replacement or upsert named: returned upgraded, as reads are
    // (not when projected: a projection may leave out the version).
    const VersionedRule rule = v_;
    plan.shape = [rule](std::span<const Doc> replies) {
      const Doc& reply = replies.front();
      std::optional<Doc> value = FindDocument(reply.get(), "value");
      auto value_iter = Find(reply.get(), "value");
      if (!value || !value_iter || !BSON_ITER_HOLDS_DOCUMENT(&*value_iter)) return ShapedReply{reply, {}, {}, {}, {}, {}};
      Doc out;
      bson_iter_t it;
      bson_iter_init(&it, reply.get());
      while (bson_iter_next(&it)) {
        if (std::string_view(bson_iter_key(&it)) == "value") AppendDoc(out.mut(), "value", Upgrade(rule, value->get()).document);
        else AppendValue(out.mut(), bson_iter_key(&it), it);
      }
      return ShapedReply{std::move(out), {}, {}, {}, {}, {}};
    };
    return AfterUpgrading({query}, Find(body, "collation"), std::move(plan));
  }

  const Command& command_;
  const RuleContext& rule_;
  const VersionedRule& v_;
};

}  // namespace

std::optional<Plan> RewritePattern(const Command& command, const RuleContext& rule, const VersionedRule& versioned,
                                   const Capabilities&) {
  return VersionedRewriter(command, rule, versioned).Rewrite();
}

std::vector<Doc> ViewStages(const VersionedRule& rule) { return UpgradeStages(rule); }

}  // namespace remold
