#include "patterns/polymorphic/rewrite.h"

#include <string>
#include <utility>
#include <vector>

#include "rewrite/aggregate_pipeline.h"
#include "rewrite/count_reply.h"
#include "rewrite/cursor_reply.h"
#include "rewrite/distinct_reply.h"
#include "rewrite/filter_clauses.h"
#include "rewrite/find_as_aggregate.h"
#include "rewrite/one_document_delete.h"
#include "rewrite/refused_statements.h"

namespace remold {
namespace {

bool IsPathOf(std::string_view path, std::string_view field) {
  return path == field || (path.size() > field.size() && path.starts_with(field) && path[field.size()] == '.');
}

// Whether an aggregation expression reads the path `field`: "$field...".
bool ExpressionReadsPath(const bson_iter_t& value, std::string_view field) {
  if (BSON_ITER_HOLDS_UTF8(&value)) {
    std::string_view text = bson_iter_utf8(&value, nullptr);
    return text.starts_with("$") && !text.starts_with("$$") && IsPathOf(text.substr(1), field);
  }
  if (!BSON_ITER_HOLDS_DOCUMENT(&value) && !BSON_ITER_HOLDS_ARRAY(&value)) return false;
  bool reads = false;
  ForEachChild(value, [&](std::string_view, const bson_iter_t& child) {
    reads = reads || ExpressionReadsPath(child, field);
  });
  return reads;
}

// Whether an aggregation expression reads the whole document.
bool ExpressionReadsWhole(const bson_iter_t& value) {
  if (BSON_ITER_HOLDS_UTF8(&value)) {
    std::string_view text = bson_iter_utf8(&value, nullptr);
    return text.starts_with("$$ROOT") || text.starts_with("$$CURRENT");
  }
  if (!BSON_ITER_HOLDS_DOCUMENT(&value) && !BSON_ITER_HOLDS_ARRAY(&value)) return false;
  bool reads = false;
  ForEachChild(value, [&](std::string_view, const bson_iter_t& child) { reads = reads || ExpressionReadsWhole(child); });
  return reads;
}

// The first key of a document value ("" for another value, or an empty one).
std::string_view FirstKeyOf(const bson_iter_t& value) {
  if (!BSON_ITER_HOLDS_DOCUMENT(&value)) return {};
  bson_iter_t child, copy = value;
  if (!bson_iter_recurse(&copy, &child) || !bson_iter_next(&child)) return {};
  return bson_iter_key(&child);
}

// Whether an aggregation expression may read `field`: a "$field..." path,
// or the whole document.
bool ExpressionReads(const bson_iter_t& value, std::string_view field) {
  return ExpressionReadsPath(value, field) || ExpressionReadsWhole(value);
}

// The parts of a new root: the $mergeObjects it merges, or itself. A part
// that is "$$ROOT" or "$$CURRENT" is the document it starts from, and is
// left out.
template <typename Fn>
void ForEachRootPart(const bson_iter_t& root, Fn&& fn) {
  auto whole = [](const bson_iter_t& part) {
    if (!BSON_ITER_HOLDS_UTF8(&part)) return false;
    std::string_view text = bson_iter_utf8(&part, nullptr);
    return text == "$$ROOT" || text == "$$CURRENT";
  };
  if (BSON_ITER_HOLDS_DOCUMENT(&root)) {
    bson_iter_t child;
    bson_iter_t copy = root;
    if (bson_iter_recurse(&copy, &child) && bson_iter_next(&child) &&
        std::string_view(bson_iter_key(&child)) == "$mergeObjects" && BSON_ITER_HOLDS_ARRAY(&child)) {
      bson_iter_t next = child;
      if (!bson_iter_next(&next)) {  // the only key
        ForEachChild(child, [&](std::string_view, const bson_iter_t& part) {
          if (!whole(part)) fn(part);
        });
        return;
      }
    }
  }
  if (!whole(root)) fn(root);
}

Doc Single(std::string_view key, const Doc& value) {
  Doc out;
  AppendDoc(out.mut(), key, value);
  return out;
}

// `body` with the values of some keys replaced (a key absent from `body`
// is appended), `collection_key`'s value set to `collection`.
Doc Rebuilt(const bson_t* body, std::string_view collection_key, const std::string& collection,
            const std::vector<std::pair<std::string, std::optional<bson_iter_t>>>& replaced = {},
            const std::vector<std::pair<std::string, Doc>>& documents = {}) {
  Doc out;
  std::vector<bool> done(documents.size() + replaced.size(), false);
  bson_iter_t it;
  bson_iter_init(&it, body);
  while (bson_iter_next(&it)) {
    std::string_view key = bson_iter_key(&it);
    if (key == collection_key) {
      AppendString(out.mut(), key, collection);
      continue;
    }
    bool handled = false;
    for (size_t i = 0; i < documents.size() && !handled; ++i)
      if (documents[i].first == key) {
        AppendDoc(out.mut(), key, documents[i].second);
        done[i] = handled = true;
      }
    for (size_t i = 0; i < replaced.size() && !handled; ++i)
      if (replaced[i].first == key) {
        if (replaced[i].second) AppendValue(out.mut(), key, *replaced[i].second);
        done[documents.size() + i] = handled = true;
      }
    if (!handled) AppendValue(out.mut(), key, it);
  }
  for (size_t i = 0; i < documents.size(); ++i)
    if (!done[i]) AppendDoc(out.mut(), documents[i].first, documents[i].second);
  return out;
}

// Whether a projection returns every field but those it excludes: no
// field included (an _id or $slice, $meta aside).
bool ExcludesOnly(const Doc& projection) {
  bson_iter_t it;
  bson_iter_init(&it, projection.get());
  while (bson_iter_next(&it)) {
    std::string_view key = bson_iter_key(&it);
    if (key == "_id") continue;
    if (key.ends_with(".$")) return false;
    if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
      bson_iter_t op;
      bson_iter_recurse(&it, &op);
      if (bson_iter_next(&op)) {
        std::string_view name = bson_iter_key(&op);
        if (name == "$slice" || name == "$meta") continue;
      }
      return false;  // $elemMatch, an expression, a sub-projection
    }
    if (BSON_ITER_HOLDS_BOOL(&it) ? bson_iter_bool(&it) : bson_iter_as_int64(&it) != 0) return false;
    if (!BSON_ITER_HOLDS_BOOL(&it) && !BSON_ITER_HOLDS_NUMBER(&it)) return false;
  }
  return true;
}

Plan UnderLogicalName(BackendCommand backend, const PolymorphicRule& rule) {
  Plan plan = Forwarded(std::move(backend));
  plan.shape = [logical = rule.logical.full()](std::span<const Doc> replies) {
    return ShapedReply{WithCursor(replies.front(), logical, std::nullopt), {}, {}, {}, {}, {}};
  };
  return plan;
}

// The commands that put the types' validators of the stored collection in
// its validator, before the first write through this remold: the stored
// collection created when it is not there, then
//   {$and: [{$or: [{<field>: {$ne: <value>}}, <the type's validator>]}, ...]}
// for every type of the collection that has one. None when no type has.
std::vector<BackendCommand> ValidatorEnsures(const RuleContext& rule, const PolymorphicRule& p) {
  std::vector<Doc> clauses;
  for (const RuleContext::SharedCollection& shared : rule.shared) {
    if (!(shared.ns == p.stored)) continue;
    for (const WrittenNamespace::Share& share : shared.shares) {
      if (share.constraint.empty()) continue;
      Doc other_type, not_equal, clause;
      AppendString(not_equal.mut(), "$ne", share.value);
      AppendDoc(other_type.mut(), share.field, not_equal);
      AppendArray(clause.mut(), "$or", {other_type, *Doc::FromJson(share.constraint)});
      clauses.push_back(std::move(clause));
    }
  }
  if (clauses.empty()) return {};
  Doc validator;
  if (clauses.size() == 1) validator = std::move(clauses.front());
  else AppendArray(validator.mut(), "$and", clauses);
  BackendCommand create, modify;
  AppendString(create.body.mut(), "create", p.stored.collection);
  AppendString(create.body.mut(), "$db", p.stored.db);
  create.holds_on_code = 48;  // NamespaceExists
  create.needed_for = modify.needed_for =
      "polymorphic rule '" + rule.name + "' for " + p.logical.full() + ": writes are refused until " +
      p.stored.full() + " holds the validators its types' rules name, which the backend did not take";
  AppendString(modify.body.mut(), "collMod", p.stored.collection);
  AppendDoc(modify.body.mut(), "validator", validator);
  AppendString(modify.body.mut(), "$db", p.stored.db);
  return {std::move(create), std::move(modify)};
}

class PolymorphicRewriter {
 public:
  PolymorphicRewriter(const Command& command, const RuleContext& rule, const PolymorphicRule& polymorphic)
      : command_(command), rule_(rule), p_(polymorphic), who_(PolymorphicRuleLabel(rule, polymorphic)) {}

  std::optional<Plan> Rewrite() const {
    const std::string& name = command_.name;
    if (p_.documents_left && (name == "find" || name == "aggregate" || name == "count" || name == "distinct" ||
                              name == "update" || name == "delete" || name == "findAndModify" ||
                              name == "findandmodify"))
      return ImmediateReply(ErrorReply(error_codes::kConflictingOperationInProgress,
                                       who_ + ": " + name + " " + DocumentsLeft(rule_.name, p_)));
    if (name == "find") return FindCommand();
    if (name == "getMore") return Redirected("collection");
    if (name == "killCursors") return Redirected("killCursors");
    if (name == "aggregate") return Aggregate();
    if (name == "count") return Count();
    if (name == "distinct") return Distinct();
    if (name == "insert") return Validated(Insert());
    if (name == "update") return Validated(Update());
    if (name == "delete") return Delete();
    if (name == "findAndModify" || name == "findandmodify") return Validated(FindAndModify());
    if (name == "createIndexes") return RewritePolymorphicCreateIndexes(command_, p_, who_);
    if (name == "listIndexes") return RewritePolymorphicListIndexes(command_, p_);
    if (name == "dropIndexes" || name == "deleteIndexes") return RewritePolymorphicDropIndexes(command_, p_, who_);
    if (name == "create") return RewritePolymorphicCreate(command_, p_, who_);
    if (name == "drop") return RewritePolymorphicDrop(command_, p_);
    if (name == "collStats" || name == "validate" || name == "collMod" || name == "dataSize" ||
        name == "compact" || name == "reIndex")
      return Refuse(error_codes::kCommandNotSupported,
                    name + " is not supported on a type of a polymorphic collection: its documents are stored in " +
                        p_.stored.full() + " with " + p_.TypeFilter() + "; run " + name + " on " + p_.stored.full());
    return Refuse(error_codes::kCommandNotSupported,
                  "command '" + name + "' is not supported on a type of a polymorphic collection (its documents "
                  "are stored in " + p_.stored.full() + ")");
  }

  // Insert without the refused documents (WithRefusedStatements' rest).
  Plan Insert() const {
    auto documents = Find(command_.body.get(), "documents");
    if (!documents || !BSON_ITER_HOLDS_ARRAY(&*documents))
      return ImmediateReply(ErrorReply(error_codes::kFailedToParse, "insert needs a 'documents' array"));
    std::vector<Doc> stamped;
    std::vector<StatementRefusal> refused;
    const std::vector<Doc> client = ArrayDocuments(*documents);
    for (size_t i = 0; i < client.size(); ++i) {
      if (Find(client[i].get(), p_.field)) {
        refused.push_back({i, NamesField("a document has the field '" + p_.field + "'")});
        continue;
      }
      stamped.push_back(Stamped(client[i]));
    }
    if (!refused.empty())
      return WithRefusedStatements(command_, "documents", std::move(refused), [this](const Command& rest) {
        return std::optional<Plan>(PolymorphicRewriter(rest, rule_, p_).Insert());
      });
    BackendCommand backend;
    backend.body = Rebuilt(command_.body.get(), "insert", p_.stored.collection, {{"documents", std::nullopt}});
    backend.sequence_id = "documents";
    backend.sequence = std::move(stamped);
    return Forwarded(std::move(backend));
  }

  Plan Update() const {
    auto updates = Find(command_.body.get(), "updates");
    if (!updates || !BSON_ITER_HOLDS_ARRAY(&*updates))
      return ImmediateReply(ErrorReply(error_codes::kFailedToParse, "update needs an 'updates' array"));
    std::vector<Doc> statements;
    std::vector<StatementRefusal> refused;
    const std::vector<Doc> client = ArrayDocuments(*updates);
    for (size_t i = 0; i < client.size(); ++i) {
      const Doc filter = FindDocument(client[i].get(), "q").value_or(Doc());
      if (FilterNamesField(filter.get(), p_.field)) {
        refused.push_back({i, NamesField("the filter names '" + p_.field + "'")});
        continue;
      }
      auto u = Find(client[i].get(), "u");
      if (!u) return ImmediateReply(ErrorReply(error_codes::kFailedToParse, "update statement needs 'u'"));
      std::variant<Doc, Refusal> stored = StoredUpdate(*u);
      if (auto* refusal = std::get_if<Refusal>(&stored)) {
        refused.push_back({i, *refusal});
        continue;
      }
      statements.push_back(Restated(client[i], "q", TypeAnd(p_, filter.get()), "u", std::get<Doc>(stored)));
    }
    if (!refused.empty())
      return WithRefusedStatements(command_, "updates", std::move(refused), [this](const Command& rest) {
        return std::optional<Plan>(PolymorphicRewriter(rest, rule_, p_).Update());
      });
    BackendCommand backend;
    backend.body = Rebuilt(command_.body.get(), "update", p_.stored.collection, {{"updates", std::nullopt}});
    backend.sequence_id = "updates";
    backend.sequence = std::move(statements);
    return Forwarded(std::move(backend));
  }

  Plan Delete() const {
    auto deletes = Find(command_.body.get(), "deletes");
    if (!deletes || !BSON_ITER_HOLDS_ARRAY(&*deletes))
      return ImmediateReply(ErrorReply(error_codes::kFailedToParse, "delete needs a 'deletes' array"));
    std::vector<Doc> statements;
    std::vector<StatementRefusal> refused;
    const std::vector<Doc> client = ArrayDocuments(*deletes);
    for (size_t i = 0; i < client.size(); ++i) {
      const Doc filter = FindDocument(client[i].get(), "q").value_or(Doc());
      if (FilterNamesField(filter.get(), p_.field)) {
        refused.push_back({i, NamesField("the filter names '" + p_.field + "'")});
        continue;
      }
      statements.push_back(
          OneDocumentDelete(command_, client[i], Restated(client[i], "q", TypeAnd(p_, filter.get()))));
    }
    if (!refused.empty())
      return WithRefusedStatements(command_, "deletes", std::move(refused), [this](const Command& rest) {
        return std::optional<Plan>(PolymorphicRewriter(rest, rule_, p_).Delete());
      });
    BackendCommand backend;
    backend.body = Rebuilt(command_.body.get(), "delete", p_.stored.collection, {{"deletes", std::nullopt}});
    backend.sequence_id = "deletes";
    backend.sequence = std::move(statements);
    return Forwarded(std::move(backend));
  }

 private:
  // A write plan, after the types' validators are in the stored
  // collection's (ValidatorEnsures).
  std::optional<Plan> Validated(std::optional<Plan> plan) const {
    if (plan && !plan->immediate_reply)
      for (BackendCommand& ensure : ValidatorEnsures(rule_, p_)) plan->ensure.push_back(std::move(ensure));
    return plan;
  }

  Plan Refuse(ErrorCode code, const std::string& what) const {
    return ImmediateReply(ErrorReply(code, who_ + ": " + what));
  }

  Refusal NamesField(const std::string& what) const {
    return Refusal{error_codes::kBadValue,
                   who_ + ": " + what + ", which the rule keeps for itself: the documents of " + p_.logical.full() +
                       " are stored in " + p_.stored.full() + " with " + p_.TypeFilter() +
                       ", and the application's documents do not have that field"};
  }

  Doc Stamped(const Doc& document) const {
    Doc out = document;
    AppendString(out.mut(), p_.field, p_.value);
    return out;
  }

  // Whether an update document (operators) writes the discriminator.
  bool UpdateNamesField(const Doc& u) const {
    bool named = false;
    bson_iter_t op;
    bson_iter_init(&op, u.get());
    while (bson_iter_next(&op)) {
      if (!BSON_ITER_HOLDS_DOCUMENT(&op)) continue;
      const bool rename = std::string_view(bson_iter_key(&op)) == "$rename";
      ForEachChild(op, [&](std::string_view path, const bson_iter_t& value) {
        if (IsPathOf(path, p_.field)) named = true;
        if (rename && BSON_ITER_HOLDS_UTF8(&value) && IsPathOf(bson_iter_utf8(&value, nullptr), p_.field))
          named = true;
      });
    }
    return named;
  }

  // Why a pipeline update cannot run on the stored document as it is, if
  // it cannot: a stage that writes or reads the discriminator (BadValue),
  // or reads the whole document other than as what $replaceRoot or
  // $replaceWith start from ($$ROOT would show the discriminator).
  std::optional<Refusal> PipelineProblem(const std::vector<Doc>& stages) const {
    for (const Doc& stage : stages) {
      bson_iter_t it;
      if (!bson_iter_init(&it, stage.get()) || !bson_iter_next(&it)) continue;
      const std::string_view name = bson_iter_key(&it);
      bool names = false, whole = false, computed = false;
      if (name == "$unset") {
        if (BSON_ITER_HOLDS_UTF8(&it)) names = IsPathOf(bson_iter_utf8(&it, nullptr), p_.field);
        else ForEachChild(it, [&](std::string_view, const bson_iter_t& path) {
          names = names || (BSON_ITER_HOLDS_UTF8(&path) && IsPathOf(bson_iter_utf8(&path, nullptr), p_.field));
        });
      } else if (name == "$replaceRoot" || name == "$replaceWith") {
        bson_iter_t root = it;
        if (name == "$replaceRoot") {
          bson_iter_t child;
          if (BSON_ITER_HOLDS_DOCUMENT(&it) && bson_iter_recurse(&it, &child) && bson_iter_find(&child, "newRoot"))
            root = child;
        }
        ForEachRootPart(root, [&](const bson_iter_t& part) {
          // An object literal names its fields; anything else makes a
          // document of values remold cannot see (which may hold one
          // named like the discriminator).
          const bool literal = BSON_ITER_HOLDS_DOCUMENT(&part) && !FirstKeyOf(part).starts_with("$");
          if (!literal) {
            computed = true;
            return;
          }
          ForEachChild(part, [&](std::string_view field, const bson_iter_t& value) {
            names = names || IsPathOf(field, p_.field) || ExpressionReadsPath(value, p_.field);
            whole = whole || ExpressionReadsWhole(value);
          });
        });
      } else {
        // $set, $addFields, $project: their fields, and what they read.
        ForEachChild(it, [&](std::string_view field, const bson_iter_t& value) {
          names = names || IsPathOf(field, p_.field) || ExpressionReadsPath(value, p_.field);
          whole = whole || ExpressionReadsWhole(value);
        });
      }
      if (names) return NamesField("the pipeline update names '" + p_.field + "'");
      if (computed)
        return Refusal{error_codes::kInvalidOptions,
                       who_ + ": a pipeline update whose " + std::string(name) + " makes the new document of "
                              "anything but $$ROOT and documents written out ({field: value, ...}) is not supported: "
                              "it could hold a field '" + p_.field + "', which the rule keeps for itself"};
      if (whole)
        return Refusal{error_codes::kInvalidOptions,
                       who_ + ": a pipeline update that reads the whole document ($$ROOT, $$CURRENT) other than as "
                              "what $replaceRoot or $replaceWith start from is not supported: the stored document "
                              "holds the discriminator '" + p_.field + "'"};
    }
    return std::nullopt;
  }

  // The update as stored: a replacement with the discriminator after the
  // document's fields; operators as they are (the filter's equality on the
  // discriminator gives it to an upserted document); a pipeline as it is
  // (it neither names the discriminator nor reads it; an inclusion
  // $project keeps it), then the discriminator set, which puts it back
  // when a stage replaced the document and changes nothing otherwise.
  std::variant<Doc, Refusal> StoredUpdate(const bson_iter_t& u) const {
    if (BSON_ITER_HOLDS_ARRAY(&u)) {
      std::vector<Doc> pipeline = ArrayDocuments(u);
      if (std::optional<Refusal> problem = PipelineProblem(pipeline)) return *problem;
      // An inclusion $project keeps the discriminator, in its place: set
      // again at the end, it would move there, and the document differ.
      for (Doc& stage : pipeline) {
        std::optional<Doc> project = FirstKey(stage.get()) == "$project" ? FindDocument(stage.get(), "$project")
                                                                         : std::nullopt;
        if (!project || ExcludesOnly(*project)) continue;
        BSON_APPEND_INT32(project->mut(), p_.field.c_str(), 1);
        stage = Stage("$project", *project);
      }
      Doc set;
      AppendString(set.mut(), p_.field, p_.value);
      pipeline.push_back(Stage("$set", set));
      Doc out;
      AppendArray(out.mut(), "u", pipeline);
      return out;  // boxed: {u: [...]}
    }
    if (!BSON_ITER_HOLDS_DOCUMENT(&u))
      return Refusal{error_codes::kFailedToParse, "the update must be a document or a pipeline"};
    uint32_t length = 0;
    const uint8_t* data = nullptr;
    bson_iter_document(&u, &length, &data);
    Doc update = Doc::FromBytes({data, length});
    bson_iter_t first;
    const bool operators = bson_iter_init(&first, update.get()) && bson_iter_next(&first) &&
                           bson_iter_key(&first)[0] == '$';
    if (!operators) {
      if (Find(update.get(), p_.field)) return NamesField("the replacement has the field '" + p_.field + "'");
      return Single("u", Stamped(update));
    }
    if (UpdateNamesField(update)) return NamesField("the update writes '" + p_.field + "'");
    return Single("u", update);
  }

  // A statement with its filter under `key` replaced by `filter`, its
  // update (when `update_key`) by the one boxed under "u" in `boxed_update`,
  // and a hint by name naming the stored index.
  Doc Restated(const Doc& statement, const char* key, const Doc& filter, const char* update_key = nullptr,
               const Doc& boxed_update = Doc()) const {
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
        bson_iter_t boxed;
        bson_iter_init_find(&boxed, boxed_update.get(), "u");
        AppendValue(out.mut(), update_key, boxed);
      } else if (name == "hint") {
        AppendHint(out.mut(), it);
      } else {
        AppendValue(out.mut(), name, it);
      }
    }
    if (!has_filter) AppendDoc(out.mut(), key, filter);
    return out;
  }

  void AppendHint(bson_t* out, const bson_iter_t& hint) const {
    if (BSON_ITER_HOLDS_UTF8(&hint)) AppendString(out, "hint", StoredIndexName(p_, bson_iter_utf8(&hint, nullptr)));
    else AppendValue(out, "hint", hint);
  }

  // The client's command on the stored collection: `collection_key` names
  // it, a hint by name names the stored index.
  BackendCommand OnStored(std::string_view collection_key,
                          const std::vector<std::pair<std::string, Doc>>& documents = {}) const {
    BackendCommand backend;
    std::optional<bson_iter_t> hint = Find(command_.body.get(), "hint");
    if (hint && BSON_ITER_HOLDS_UTF8(&*hint)) {
      Doc named;
      AppendHint(named.mut(), *hint);
      bson_iter_t it;
      bson_iter_init_find(&it, named.get(), "hint");
      backend.body = Rebuilt(command_.body.get(), collection_key, p_.stored.collection, {{"hint", it}}, documents);
    } else {
      backend.body = Rebuilt(command_.body.get(), collection_key, p_.stored.collection, {}, documents);
    }
    return backend;
  }

  Plan Redirected(std::string_view collection_key) const {
    if (command_.name == "killCursors") return Forwarded(OnStored(collection_key));
    return UnderLogicalName(OnStored(collection_key), p_);
  }

  bool SortNamesField(const std::optional<Doc>& sort) const {
    if (!sort) return false;
    bson_iter_t it;
    bson_iter_init(&it, sort->get());
    while (bson_iter_next(&it))
      if (IsPathOf(bson_iter_key(&it), p_.field)) return true;
    return false;
  }

  // The clauses of `filter` that do not name the discriminator, beside it:
  // what a read through the view selects before the view.
  Doc BeforeView(const Doc& filter) const {
    std::vector<Doc> clauses, passing;
    TopLevelClauses(filter.get(), clauses);
    for (Doc& clause : clauses)
      if (!FilterNamesField(clause.get(), p_.field)) passing.push_back(std::move(clause));
    const Doc rest = JoinClauses(std::move(passing));
    return TypeAnd(p_, rest.get());
  }

  std::optional<Plan> FindCommand() const {
    const bson_t* body = command_.body.get();
    const Doc filter = FindDocument(body, "filter").value_or(Doc());
    const std::optional<Doc> projection = FindDocument(body, "projection");
    std::optional<Doc> stored_projection = ProjectionWithoutField(projection, p_.field);
    if (!FilterNamesField(filter.get(), p_.field) && !SortNamesField(FindDocument(body, "sort")) && stored_projection)
      return UnderLogicalName(OnStored("find", {{"filter", TypeAnd(p_, filter.get())},
                                                {"projection", *stored_projection}}),
                              p_);
    // Through the view: the documents as the application wrote them.
    FindPipeline parts;
    parts.before_view = {Stage("$match", BeforeView(filter))};
    parts.view = DiscriminatorOut(p_);
    parts.after_view = filter;
    Command find = command_;
    if (std::optional<bson_iter_t> hint = Find(body, "hint"); hint && BSON_ITER_HOLDS_UTF8(&*hint))
      find.body = OnStored("find").body;
    auto aggregate = FindAsAggregate(find, p_.stored, std::move(parts), "when it names '" + p_.field + "'");
    if (auto* refusal = std::get_if<Refusal>(&aggregate)) return Refuse(refusal->code, refusal->message);
    AggregateFind& out = std::get<AggregateFind>(aggregate);
    Plan plan = UnderLogicalName(std::move(out.command), p_);
    if (out.single_batch) {
      auto kill = SingleBatchShape(p_.stored);
      plan.shape = [kill, logical = p_.logical.full()](std::span<const Doc> replies) {
        ShapedReply shaped = kill(replies);
        shaped.reply = WithCursor(shaped.reply, logical, std::nullopt);
        return shaped;
      };
    }
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
      const std::string stage(FirstKey(stages[0].get()));  // "": an empty stage, which the backend refuses
      if (IsAboutTheCollection(stage) || stage == "$search" || stage == "$searchMeta" || stage == "$listSearchIndexes")
        return Refuse(error_codes::kCommandNotSupported,
                      "aggregate stage " + stage + " is not supported on a type of a polymorphic collection (its "
                      "documents are stored in " + p_.stored.full() + ")");
      if (stage == "$geoNear") {
        // Must come first: it selects the type's documents itself.
        Doc spec = FindDocument(stages[0].get(), "$geoNear").value_or(Doc());
        const Doc query = FindDocument(spec.get(), "query").value_or(Doc());
        if (FilterNamesField(query.get(), p_.field))
          return Refuse(error_codes::kBadValue, "a $geoNear query naming '" + p_.field + "' is not supported");
        pipeline.push_back(Stage("$geoNear", Rebuilt(spec.get(), "", "", {}, {{"query", TypeAnd(p_, query.get())}})));
        for (Doc& stage : DiscriminatorOut(p_)) pipeline.push_back(std::move(stage));
        i = 1;
      }
    }
    if (i == 0) {
      // The client's first $match, beside the type, selects what it can before the view.
      std::optional<Doc> match = stages.empty() ? std::nullopt : FindDocument(stages[0].get(), "$match");
      pipeline.push_back(Stage("$match", match ? BeforeView(*match) : TypeAnd(p_, nullptr)));
      for (Doc& stage : DiscriminatorOut(p_)) pipeline.push_back(std::move(stage));
    }
    for (; i < stages.size(); ++i) pipeline.push_back(std::move(stages[i]));
    Doc pipeline_box;
    AppendArray(pipeline_box.mut(), "pipeline", pipeline);
    bson_iter_t it;
    bson_iter_init_find(&it, pipeline_box.get(), "pipeline");
    BackendCommand backend = OnStored("aggregate");
    backend.body = Rebuilt(backend.body.get(), "", "", {{"pipeline", it}});
    return UnderLogicalName(std::move(backend), p_);
  }

  // A read through the view, as an aggregate ending in `after`.
  BackendCommand ViewAggregate(const Doc& filter, std::vector<Doc> after) const {
    std::vector<Doc> pipeline = {Stage("$match", BeforeView(filter))};
    for (Doc& stage : DiscriminatorOut(p_)) pipeline.push_back(std::move(stage));
    if (!filter.empty()) pipeline.push_back(Stage("$match", filter));
    for (Doc& stage : after) pipeline.push_back(std::move(stage));
    BackendCommand backend;
    bson_t* out = backend.body.mut();
    AppendString(out, "aggregate", p_.stored.collection);
    AppendArray(out, "pipeline", pipeline);
    AppendDoc(out, "cursor", Doc());
    if (auto collation = Find(command_.body.get(), "collation")) AppendValue(out, "collation", *collation);
    if (auto hint = Find(command_.body.get(), "hint")) AppendHint(out, *hint);
    SealCommand(command_, ArgumentTarget::kRead, p_.stored.db, out);
    return backend;
  }

  std::optional<Plan> Count() const {
    const bson_t* body = command_.body.get();
    const Doc query = FindDocument(body, "query").value_or(Doc());
    if (!FilterNamesField(query.get(), p_.field)) return Forwarded(OnStored("count", {{"query", TypeAnd(p_, query.get())}}));
    Plan plan = Forwarded(ViewAggregate(query, CountStages(body)));
    plan.shape = CountReply;
    return plan;
  }

  std::optional<Plan> Distinct() const {
    const bson_t* body = command_.body.get();
    const Doc query = FindDocument(body, "query").value_or(Doc());
    std::optional<std::string> key = FindString(body, "key");
    if (!key) return Forwarded(OnStored("distinct"));  // the server says what is wrong
    if (!IsPathOf(*key, p_.field) && !FilterNamesField(query.get(), p_.field))
      return Forwarded(OnStored("distinct", {{"query", TypeAnd(p_, query.get())}}));
    Plan plan = Forwarded(ViewAggregate(query, DistinctStages(*key)));
    plan.shape = [](std::span<const Doc> replies) {
      if (!IsOkReply(replies.front())) return ShapedReply{replies.front(), {}, {}, {}, {}, {}};
      return ShapedReply{DistinctReply(replies), {}, {}, {}, {}, {}};
    };
    return plan;
  }

  std::optional<Plan> FindAndModify() const {
    const bson_t* body = command_.body.get();
    const Doc query = FindDocument(body, "query").value_or(Doc());
    if (FilterNamesField(query.get(), p_.field))
      return ImmediateReply(ErrorReply(NamesField("the query names '" + p_.field + "'")));
    if (SortNamesField(FindDocument(body, "sort")))
      return ImmediateReply(ErrorReply(NamesField("the sort names '" + p_.field + "'")));
    std::optional<Doc> fields = ProjectionWithoutField(FindDocument(body, "fields"), p_.field);
    if (!fields) return ImmediateReply(ErrorReply(NamesField("the projection names '" + p_.field + "'")));
    std::vector<std::pair<std::string, Doc>> documents = {{"query", TypeAnd(p_, query.get())}, {"fields", *fields}};
    BackendCommand backend = OnStored(command_.name);
    if (auto update = Find(body, "update")) {
      std::variant<Doc, Refusal> stored = StoredUpdate(*update);
      if (auto* refusal = std::get_if<Refusal>(&stored)) return ImmediateReply(ErrorReply(*refusal));
      bson_iter_t boxed;
      bson_iter_init_find(&boxed, std::get<Doc>(stored).get(), "u");
      backend.body = Rebuilt(backend.body.get(), "", "", {{"update", boxed}}, documents);
    } else {
      backend.body = Rebuilt(backend.body.get(), "", "", {}, documents);
    }
    return Forwarded(std::move(backend));
  }

  const Command& command_;
  const RuleContext& rule_;
  const PolymorphicRule& p_;
  const std::string who_;
};

}  // namespace

bool FilterNamesField(const bson_t* filter, std::string_view field) {
  if (!filter) return false;
  bson_iter_t it;
  bson_iter_init(&it, filter);
  while (bson_iter_next(&it)) {
    std::string_view key = bson_iter_key(&it);
    if (key.empty() || key[0] != '$') {
      if (IsPathOf(key, field)) return true;
      continue;
    }
    if (key == "$and" || key == "$or" || key == "$nor") {
      if (!BSON_ITER_HOLDS_ARRAY(&it)) return true;  // the server refuses it; not ours to pass
      bool named = false;
      ForEachChild(it, [&](std::string_view, const bson_iter_t& clause) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&clause)) {
          named = true;
          return;
        }
        uint32_t length = 0;
        const uint8_t* data = nullptr;
        bson_iter_document(&clause, &length, &data);
        bson_t child;
        bson_init_static(&child, data, length);
        named = named || FilterNamesField(&child, field);
      });
      if (named) return true;
      continue;
    }
    if (key == "$expr") {
      if (ExpressionReads(it, field)) return true;
      continue;
    }
    if (key == "$text" || key == "$comment") continue;
    return true;  // $where, $jsonSchema, an operator remold does not know
  }
  return false;
}

Doc TypeAnd(const PolymorphicRule& rule, const bson_t* filter) {
  Doc out;
  AppendString(out.mut(), rule.field, rule.value);
  if (!filter) return out;
  bson_iter_t it;
  bson_iter_init(&it, filter);
  while (bson_iter_next(&it)) AppendValue(out.mut(), bson_iter_key(&it), it);
  return out;
}

std::optional<Doc> ProjectionWithoutField(const std::optional<Doc>& projection, std::string_view field) {
  Doc out;
  if (!projection || projection->empty()) {
    BSON_APPEND_INT32(out.mut(), std::string(field).c_str(), 0);
    return out;
  }
  bson_iter_t it;
  bson_iter_init(&it, projection->get());
  while (bson_iter_next(&it)) {
    if (IsPathOf(bson_iter_key(&it), field) || ExpressionReads(it, field)) return std::nullopt;
  }
  out = *projection;
  if (ExcludesOnly(*projection)) BSON_APPEND_INT32(out.mut(), std::string(field).c_str(), 0);
  return out;
}

std::string StoredIndexName(const PolymorphicRule& rule, std::string_view name) {
  if (name == "_id_") return std::string(name);
  return rule.IndexPrefix() + std::string(name);
}

std::vector<Doc> DiscriminatorOut(const PolymorphicRule& rule) {
  Doc without;
  BSON_APPEND_INT32(without.mut(), rule.field.c_str(), 0);
  return {Stage("$project", without), Stage("$project", without)};
}

std::vector<Doc> ViewStages(const PolymorphicRule& rule) {
  Doc type;
  AppendString(type.mut(), rule.field, rule.value);
  std::vector<Doc> stages = {Stage("$match", type)};
  for (Doc& stage : DiscriminatorOut(rule)) stages.push_back(std::move(stage));
  return stages;
}

std::string PolymorphicRuleLabel(const RuleContext& rule, const PolymorphicRule& polymorphic) {
  return "polymorphic rule '" + rule.name + "' for " + polymorphic.logical.full();
}

std::string DocumentsLeft(const std::string& rule_name, const PolymorphicRule& polymorphic) {
  return "is refused while " + polymorphic.logical.full() + " holds documents written before the rule, which " +
         polymorphic.stored.full() + " does not hold: `remold migrate --rule " + rule_name +
         "` moves them (the rule's `migrating: false` says there are none, and serves " + polymorphic.stored.full() +
         " alone)";
}

std::optional<Plan> RewritePattern(const Command& command, const RuleContext& rule, const PolymorphicRule& polymorphic,
                                   const Capabilities&) {
  return PolymorphicRewriter(command, rule, polymorphic).Rewrite();
}

}  // namespace remold
