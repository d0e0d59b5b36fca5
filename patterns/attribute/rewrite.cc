#include "patterns/attribute/rewrite.h"

#include <algorithm>
#include <string>
#include <vector>

#include "patterns/attribute/filter.h"
#include "patterns/attribute/indexes.h"
#include "patterns/attribute/update.h"
#include "patterns/attribute/view.h"
#include "rewrite/aggregate_pipeline.h"
#include "rewrite/cursor_reply.h"
#include "rewrite/distinct_reply.h"
#include "rewrite/find_as_aggregate.h"
#include "rewrite/one_document_delete.h"
#include "rewrite/refused_statements.h"
#include "rewrite/plan.h"

namespace remold {
namespace {

std::string FirstComponent(std::string_view path) {
  return std::string(path.substr(0, path.find('.')));
}


class AttributeRewriter {
 public:
  AttributeRewriter(const Command& command, const RuleContext& rule, const AttributeRule& attribute,
                    int32_t max_document_size)
      : command_(command), rule_(rule), a_(attribute), max_document_size_(max_document_size) {}

  std::optional<Plan> Rewrite() {
    const std::string& name = command_.name;
    if (name == "find") return FindCommand();
    if (name == "getMore") return GetMore();
    if (name == "aggregate") return Aggregate();
    if (name == "count") return Count();
    if (name == "distinct") return Distinct();
    if (name == "delete") return Delete();
    if (name == "insert") return a_.StoresFlat() ? std::nullopt : std::optional(Insert());
    if (name == "update") return Update();
    if (name == "findAndModify" || name == "findandmodify") return FindAndModify();
    if (name == "createIndexes") return AttributeCreateIndexes(command_, rule_, a_);
    if (name == "create") return Create();
    return std::nullopt;  // everything else is about the collection as stored
  }

 private:
  Refusal Named(ErrorCode code, const std::string& what) const {
    return {code, "attribute rule '" + rule_.name + "' for " + a_.logical.full() + ": " + what};
  }

  Plan Refuse(ErrorCode code, const std::string& what) const { return ImmediateReply(ErrorReply(Named(code, what))); }

  // Why a document the client writes cannot be stored (it names the pair
  // array: its pairs would be read back unfolded, not as the array it
  // wrote), or nothing.
  std::optional<std::string> NamesThePairArray(const bson_t* doc, std::string_view what) const {
    if (!::remold::Find(doc, a_.array_field)) return std::nullopt;
    return "field '" + a_.array_field + "' is reserved: it holds the attributes (" + std::string(what) +
           " with a field '" + a_.array_field + "' refused); write the attributes by name";
  }

  // Why the folded form of `flat` cannot be stored (it fits 16 MiB flat but
  // not folded: each attribute becomes a {k, v} document), or nothing.
  std::optional<Refusal> TooLargeFolded(const bson_t* flat, const Doc& folded) const {
    const size_t size = folded.bytes().size();
    if (size <= static_cast<size_t>(max_document_size_)) return std::nullopt;
    return Named(error_codes::kBSONObjectTooLarge,
                 "the document is " + std::to_string(flat->len) + " bytes as written and " + std::to_string(size) +
                     " bytes with its attributes folded into '" + a_.array_field + "' pairs, over the " +
                     std::to_string(max_document_size_) + "-byte limit of a stored document");
  }

  // Rewrites the filter under `key` of `doc` into `out` (or refuses).
  std::optional<Refusal> Filter(const bson_t* doc, const char* key, Doc& out) const {
    std::optional<Doc> filter = FindDocument(doc, key);
    if (!filter) return std::nullopt;
    FilterRewrite rewritten = RewriteAttributeFilter(a_, filter->get());
    if (rewritten.error) return Refusal{rewritten.code, *rewritten.error};
    out = std::move(rewritten.filter);
    return std::nullopt;
  }

  // Projection operators that exist only in find ($slice, $elemMatch,
  // positional "f.$") cannot run in the unfolding aggregate.
  std::optional<std::string> FindOnlyProjection(const std::optional<Doc>& projection) const {
    if (!projection) return std::nullopt;
    bson_iter_t it;
    bson_iter_init(&it, projection->get());
    while (bson_iter_next(&it)) {
      std::string_view key = bson_iter_key(&it);
      if (!a_.IsAttribute(FirstComponent(key))) continue;
      bool positional = key.size() >= 2 && key.substr(key.size() - 2) == ".$";
      bool operator_value = false;
      if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
        bson_iter_t child, copy = it;
        operator_value = bson_iter_recurse(&copy, &child) && bson_iter_next(&child) &&
                         (std::string_view(bson_iter_key(&child)) == "$slice" ||
                          std::string_view(bson_iter_key(&child)) == "$elemMatch");
      }
      if (positional || operator_value)
        return "projection '" + std::string(key) + "' uses a find-only operator ($slice, "
               "$elemMatch or positional $) on an attribute, which is not supported";
    }
    return std::nullopt;
  }

  bool MentionsAttribute(const std::optional<Doc>& spec) const {
    if (!spec) return false;
    bson_iter_t it;
    bson_iter_init(&it, spec->get());
    while (bson_iter_next(&it))
      if (a_.IsAttribute(FirstComponent(bson_iter_key(&it)))) return true;
    return false;
  }


  // A command like the client's, with `replacements` taking the place of
  // the fields of the same names.
  BackendCommand Rebuilt(const std::vector<std::pair<std::string, Doc>>& replacements,
                         const std::vector<std::pair<std::string, std::vector<Doc>>>& arrays = {}) const {
    BackendCommand backend;
    bson_iter_t it;
    bson_iter_init(&it, command_.body.get());
    while (bson_iter_next(&it)) {
      std::string_view key = bson_iter_key(&it);
      bool replaced = false;
      for (const auto& [name, doc] : replacements) {
        if (name == key) {
          AppendDoc(backend.body.mut(), key, doc);
          replaced = true;
        }
      }
      for (const auto& [name, docs] : arrays) {
        if (name == key) {
          AppendArray(backend.body.mut(), key, docs);
          replaced = true;
        }
      }
      if (!replaced) AppendValue(backend.body.mut(), key, it);
    }
    return backend;
  }

  // Unfolds the documents of a cursor reply's first or next batch.
  // The cursor's documents unfolded; `as_stored` counts those kept as
  // stored (a pair array that is not one keeps its place in the result).
  static Doc UnfoldCursorReply(const AttributeRule& rule, const Doc& reply, int64_t& as_stored) {
    return RewriteCursorReply(reply, [&](std::string_view key, const bson_iter_t& value, CursorOut cursor) {
      if ((key != "firstBatch" && key != "nextBatch") || !BSON_ITER_HOLDS_ARRAY(&value)) return false;
      std::vector<Doc> docs;
      for (const Doc& doc : ArrayDocuments(value)) {
        docs.push_back(UnfoldAttributes(rule, doc.get()));
        if (Find(docs.back().get(), rule.array_field)) ++as_stored;
      }
      AppendArray(cursor.doc, key, docs);
      return true;
    });
  }

  Plan WithUnfoldedCursor(BackendCommand backend) const {
    Plan plan;
    plan.ensure.push_back(EnsureAttributeIndex(a_));
    plan.commands.push_back(std::move(backend));
    const AttributeRule rule = a_;
    plan.shape = [rule](std::span<const Doc> replies) {
      ShapedReply out;
      out.reply = rule.unfold ? UnfoldCursorReply(rule, replies.front(), out.returned_as_stored) : replies.front();
      return out;
    };
    return plan;
  }

  // create: the collection as the client asks, then remold's pair index,
  // so that it is ready as after a first write (not inside a transaction:
  // the index would be built outside it, on a collection not committed).
  Plan Create() const {
    Plan plan;
    plan.commands.push_back(Rebuilt({}));
    if (!InTransaction(command_)) {
      const AttributeRule rule = a_;
      plan.then = [rule](std::span<const Doc> replies) {
        BackendCommand index = EnsureAttributeIndex(rule);
        index.may_fail = true;  // the client's create succeeded: its reply stands
        return IsOkReply(replies.front()) ? Step{{std::move(index)}, {}} : Step{};
      };
    }
    plan.shape = [](std::span<const Doc> replies) { return ShapedReply{replies.front(), {}, {}, {}, {}, {}}; };
    return plan;
  }

  Plan Passed(BackendCommand backend) const {
    Plan plan;
    plan.ensure.push_back(EnsureAttributeIndex(a_));
    plan.commands.push_back(std::move(backend));
    plan.shape = [](std::span<const Doc> replies) { return ShapedReply{replies.front(), {}, {}, {}, {}, {}}; };
    return plan;
  }

  Plan FindCommand() const {
    const bson_t* body = command_.body.get();
    Doc filter;
    if (auto error = Filter(body, "filter", filter)) return Refuse(error->code, error->message);
    std::optional<Doc> sort = FindDocument(body, "sort");
    std::optional<Doc> projection = FindDocument(body, "projection");
    const bool needs_flat = MentionsAttribute(sort) || MentionsAttribute(projection);
    if (!needs_flat || !a_.unfold) {
      if (needs_flat && MentionsAttribute(sort))
        return Refuse(error_codes::kBadValue,
                      "sorting by an attribute needs `unfold: true` (attributes are stored in '" +
                          a_.array_field + "')");
      return WithUnfoldedCursor(Rebuilt({{"filter", filter}}));
    }
    if (auto problem = FindOnlyProjection(projection))
      return Refuse(error_codes::kInvalidOptions, *problem);
    // Sort or projection on attributes: an aggregate that unfolds first.
    FindPipeline parts;
    if (!filter.empty()) parts.before_view.push_back(Stage("$match", filter));
    parts.view = ViewStages(a_);
    auto aggregate = FindAsAggregate(command_, a_.logical, std::move(parts),
                                     "with a sort or projection on attributes");
    if (auto* refusal = std::get_if<Refusal>(&aggregate)) return Refuse(refusal->code, refusal->message);
    AggregateFind& find = std::get<AggregateFind>(aggregate);
    Plan plan = Passed(std::move(find.command));
    if (find.single_batch) plan.shape = SingleBatchShape(a_.logical);
    return plan;
  }

  Plan GetMore() const {
    BackendCommand backend;
    backend.body = command_.body;
    return WithUnfoldedCursor(std::move(backend));
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
      // Must stay first; the documents they produce are unfolded after.
      if (MustStayFirst(stage)) {
        pipeline.push_back(stages[0]);
        i = 1;
      }
    }
    for (; i < stages.size(); ++i) {  // leading $match stages use the index
      std::optional<Doc> match = FindDocument(stages[i].get(), "$match");
      if (!match) break;
      FilterRewrite rewritten = RewriteAttributeFilter(a_, match->get());
      if (rewritten.error) return Refuse(rewritten.code, *rewritten.error);
      pipeline.push_back(Stage("$match", rewritten.filter));
    }
    for (Doc& stage : ViewStages(a_)) pipeline.push_back(std::move(stage));
    for (; i < stages.size(); ++i) pipeline.push_back(std::move(stages[i]));
    return Passed(Rebuilt({}, {{"pipeline", pipeline}}));
  }

  Plan Count() const {
    Doc query;
    if (auto error = Filter(command_.body.get(), "query", query)) return Refuse(error->code, error->message);
    return Passed(Rebuilt({{"query", query}}));
  }

  Plan Distinct() const {
    const bson_t* body = command_.body.get();
    Doc query;
    if (auto error = Filter(body, "query", query)) return Refuse(error->code, error->message);
    std::optional<std::string> key = FindString(body, "key");
    if (!key || !a_.IsAttribute(FirstComponent(*key))) return Passed(Rebuilt({{"query", query}}));
    // distinct of an attribute: its pairs' values, arrays looked into.
    std::string name = FirstComponent(*key);
    std::string sub = key->size() > name.size() ? key->substr(name.size()) : "";
    const std::string pair = a_.array_field;
    std::vector<Doc> pipeline;
    if (!query.empty()) pipeline.push_back(Stage("$match", query));
    Doc unwind_pairs;
    AppendString(unwind_pairs.mut(), "$unwind", "$" + pair);
    pipeline.push_back(std::move(unwind_pairs));
    Doc by_name;
    AppendString(by_name.mut(), pair + "." + a_.key_name, name);
    pipeline.push_back(Stage("$match", by_name));
    for (Doc& stage : DistinctStages(pair + "." + a_.value_name + sub)) pipeline.push_back(std::move(stage));
    BackendCommand backend;
    bson_t* out = backend.body.mut();
    AppendString(out, "aggregate", a_.logical.collection);
    AppendArray(out, "pipeline", pipeline);
    AppendDoc(out, "cursor", Doc());
    if (auto collation = Find(body, "collation")) AppendValue(out, "collation", *collation);
    SealCommand(command_, ArgumentTarget::kRead, a_.logical.db, out);
    Plan plan;
    plan.ensure.push_back(EnsureAttributeIndex(a_));
    plan.commands.push_back(std::move(backend));
    if (a_.migrating) {
      // The documents not yet in the pair form keep the attribute as a field.
      Doc client_query = FindDocument(body, "query").value_or(Doc());
      BackendCommand flat;
      bson_t* flat_body = flat.body.mut();
      AppendString(flat_body, "distinct", a_.logical.collection);
      AppendString(flat_body, "key", *key);
      AppendDoc(flat_body, "query", InStoredForm(a_, false, client_query));
      if (auto collation = Find(body, "collation")) AppendValue(flat_body, "collation", *collation);
      SealCommand(command_, ArgumentTarget::kRead, a_.logical.db, flat_body);
      plan.commands.push_back(std::move(flat));
    }
    plan.shape = [](std::span<const Doc> replies) { return ShapedReply{DistinctReply(replies), {}, {}, {}, {}, {}}; };
    return plan;
  }

  Plan Delete() const {
    auto deletes = ::remold::Find(command_.body.get(), "deletes");
    if (!deletes || !BSON_ITER_HOLDS_ARRAY(&*deletes))
      return ImmediateReply(ErrorReply(error_codes::kFailedToParse, "delete needs a 'deletes' array"));
    std::vector<Doc> statements;
    for (const Doc& statement : ArrayDocuments(*deletes)) {
      Doc q;
      if (auto error = Filter(statement.get(), "q", q)) return Refuse(error->code, error->message);
      statements.push_back(OneDocumentDelete(command_, statement, Replaced(statement, "q", q)));
    }
    return Passed(Rebuilt({}, {{"deletes", statements}}));
  }

  static Doc Replaced(const Doc& doc, std::string_view field, const Doc& value) {
    Doc out;
    bson_iter_t it;
    bson_iter_init(&it, doc.get());
    while (bson_iter_next(&it)) {
      if (field == bson_iter_key(&it)) AppendDoc(out.mut(), field, value);
      else AppendValue(out.mut(), bson_iter_key(&it), it);
    }
    return out;
  }

  Plan Insert() const {
    auto documents = ::remold::Find(command_.body.get(), "documents");
    if (!documents || !BSON_ITER_HOLDS_ARRAY(&*documents))
      return ImmediateReply(ErrorReply(error_codes::kFailedToParse, "insert needs a 'documents' array"));
    std::vector<Doc> folded;
    std::vector<StatementRefusal> refused;  // each document refused on its own (refused_statements.h)
    const std::vector<Doc> documents_sent = ArrayDocuments(*documents);
    for (size_t i = 0; i < documents_sent.size(); ++i) {
      const bson_t* doc = documents_sent[i].get();
      std::string error;
      if (auto reserved = NamesThePairArray(doc, "a document")) error = *reserved;
      else folded.push_back(FoldAttributes(a_, doc, &error));
      if (!error.empty()) refused.push_back({i, Named(error_codes::kBadValue, error)});
      else if (auto too_large = TooLargeFolded(doc, folded.back())) refused.push_back({i, *too_large});
    }
    if (!refused.empty())
      return WithRefusedStatements(command_, "documents", std::move(refused), [this](const Command& rest) {
        return AttributeRewriter(rest, rule_, a_, max_document_size_).Insert();
      });
    Plan plan = Passed(Rebuilt({}));
    // The documents travel as a document sequence, like the client's.
    Doc body;
    bson_copy_to_excluding_noinit(plan.commands[0].body.get(), body.mut(), "documents", nullptr);
    plan.commands[0].body = std::move(body);
    plan.commands[0].sequence_id = "documents";
    plan.commands[0].sequence = std::move(folded);
    return plan;
  }

  Plan Update() const {
    auto updates = ::remold::Find(command_.body.get(), "updates");
    if (!updates || !BSON_ITER_HOLDS_ARRAY(&*updates))
      return ImmediateReply(ErrorReply(error_codes::kFailedToParse, "update needs an 'updates' array"));
    std::vector<Doc> statements = ArrayDocuments(*updates);
    std::vector<Doc> rewritten;
    std::optional<size_t> attribute_statement;
    Doc fixed_ops;
    std::vector<AttributeOp> ops;
    std::vector<StatementRefusal> refused;  // each statement refused on its own (refused_statements.h)
    auto refuse = [&](size_t i, ErrorCode code, const std::string& what) { refused.push_back({i, Named(code, what)}); };
    for (size_t i = 0; i < statements.size(); ++i) {
      const Doc& statement = statements[i];
      Doc q;
      if (auto error = Filter(statement.get(), "q", q)) {
        refuse(i, error->code, error->message);
        continue;
      }
      Doc out = Replaced(statement, "q", q);
      auto u = ::remold::Find(statement.get(), "u");
      if (!u) return ImmediateReply(ErrorReply(error_codes::kFailedToParse, "update statement needs 'u'"));
      if (BSON_ITER_HOLDS_ARRAY(&*u)) {
        refuse(i, error_codes::kInvalidOptions, "pipeline updates are not supported on an attribute collection");
        continue;
      }
      std::optional<Doc> u_doc = FindDocument(statement.get(), "u");
      if (!IsOperatorUpdate(*u_doc)) {
        if (auto reserved = NamesThePairArray(u_doc->get(), "a replacement")) {
          refuse(i, error_codes::kBadValue, *reserved);
          continue;
        }
      }
      if (!IsOperatorUpdate(*u_doc) && a_.StoresFlat()) {  // stored as written
        rewritten.push_back(std::move(out));
        continue;
      }
      if (!IsOperatorUpdate(*u_doc)) {  // a replacement: fold it (an upsert inserts it as is)
        std::string error;
        Doc folded = FoldAttributes(a_, u_doc->get(), &error);
        if (!error.empty()) {
          refuse(i, error_codes::kBadValue, error);
          continue;
        }
        if (auto too_large = TooLargeFolded(u_doc->get(), folded)) {
          refused.push_back({i, *too_large});
          continue;
        }
        rewritten.push_back(Replaced(out, "u", folded));
        continue;
      }
      // An upsert seeds the new document from the filter's equalities, which
      // are $elemMatch clauses here: the attributes would not get in.
      if (FindBool(statement.get(), "upsert").value_or(false) && MentionsAttributeDeep(statement, "q")) {
        refuse(i, error_codes::kInvalidOptions,
               "upsert with a filter on attributes is not supported (the inserted document would not get them)");
        continue;
      }
      Doc fixed;
      std::vector<AttributeOp> statement_ops;
      if (auto refusal = SplitAttributeUpdate(a_, *u_doc, fixed, statement_ops)) {
        if (refusal->code == error_codes::kTypeMismatch && statements.size() == 1)
          return StatementWriteError(i, refusal->code, refusal->message);  // as mongod words it
        refuse(i, refusal->code, refusal->message);
        continue;
      }
      if (statement_ops.empty()) {
        rewritten.push_back(std::move(out));
        continue;
      }
      if (statements.size() != 1)
        return Refuse(error_codes::kInvalidOptions,
                      "an update batch with several statements cannot change attributes; send "
                      "attribute updates one statement per command");
      if (FindBool(statement.get(), "upsert").value_or(false)) {
        refuse(i, error_codes::kInvalidOptions, "upsert with attribute update operators is not supported");
        continue;
      }
      attribute_statement = i;
      fixed_ops = std::move(fixed);
      ops = std::move(statement_ops);
    }
    if (!refused.empty())
      return WithRefusedStatements(command_, "updates", std::move(refused), [this](const Command& rest) {
        return AttributeRewriter(rest, rule_, a_, max_document_size_).Update();
      });
    if (!attribute_statement) {
      Plan plan = Passed(Rebuilt({}, {{"updates", rewritten}}));
      return plan;
    }
    if (a_.StoresFlat()) return FlatAttributeUpdate(statements[*attribute_statement]);
    return AttributeUpdate(statements[*attribute_statement], fixed_ops, ops);
  }

  // While migrating to the flat form: the documents in the rule's form that
  // the filter matches are unfolded first (each under a guard that it is
  // unchanged), then the client's statement runs as written, on flat
  // documents only, so it never writes plain fields next to the pairs.
  Plan FlatAttributeUpdate(const Doc& statement) const {
    const Doc client_filter = FindDocument(statement.get(), "q").value_or(Doc());
    AttributeRule pairs_only = a_;
    pairs_only.migrating.reset();
    FilterRewrite in_pairs = RewriteAttributeFilter(pairs_only, client_filter.get());
    if (in_pairs.error) return Refuse(in_pairs.code, *in_pairs.error);
    const Doc stored_in_pairs = InStoredForm(a_, true, in_pairs.filter);
    const Doc flat_only = InStoredForm(a_, false, client_filter);
    Plan update = Passed(Rebuilt({}, {{"updates", {Replaced(statement, "q", flat_only)}}}));
    const bool multi = FindBool(statement.get(), "multi").value_or(false);
    const Command command = command_;
    const AttributeRule rule = a_;
    return AfterPrelude(DocumentsToConvertRead(command_, a_, statement, stored_in_pairs),
                        [command, rule](const Doc& reply) {
                          return ConversionWrites(command, rule, reply, MigrationDirection::kToFlat);
                        },
                        std::move(update), ConversionRounds(multi));
  }

  // Whether the filter under `key` names an attribute anywhere.
  bool MentionsAttributeDeep(const Doc& doc, const char* key) const {
    std::optional<Doc> filter = FindDocument(doc.get(), key);
    if (!filter) return false;
    FilterRewrite rewritten = RewriteAttributeFilter(a_, filter->get());
    return !(rewritten.filter == *filter);
  }

  // An update that changes attributes, safe under concurrent writers:
  //  1. read the _ids the filter matches (one for updateOne);
  //  2. push a neutral pair for each changed attribute where it is missing
  //     ($set/$min/$max: the value; $inc/$mul: 0), to those _ids that still
  //     match the filter;
  //  3. the client's write: one statement applies every operator (the
  //     attributes through arrayFilters on their pairs) to those _ids that
  //     still match the filter, so a conditional update stays atomic;
  //  4. pull the $unset attributes from those _ids.
  // Steps 2 and 4 are idempotent and carry no txnNumber outside a
  // transaction; step 3 carries the client's, so a retry is recognised.
  // A filter that tests the absence of an attribute the update changes is
  // refused: step 2 would change its answer.
  Plan AttributeUpdate(const Doc& statement, const Doc& fixed_ops,
                       const std::vector<AttributeOp>& ops) const {
    const bson_t* s = statement.get();
    std::optional<Doc> client_filter = FindDocument(s, "q");
    for (const AttributeOp& op : ops) {
      if (op.op != "$unset" && client_filter && TestsAbsence(client_filter->get(), op.name))
        return Refuse(error_codes::kInvalidOptions,
                      "an update whose filter tests the absence of attribute '" + op.name +
                          "' ($exists: false, null, $ne, $nin, $not, $nor) while changing it is "
                          "not supported");
    }
    Doc q;
    Filter(s, "q", q);
    return AttributeUpdatePlan(command_, a_, statement, q, fixed_ops, ops);
  }

  Plan FindAndModify() const {
    const bson_t* body = command_.body.get();
    Doc query;
    if (auto error = Filter(body, "query", query)) return Refuse(error->code, error->message);
    if (MentionsAttribute(FindDocument(body, "sort")) || MentionsAttribute(FindDocument(body, "fields")))
      return Refuse(error_codes::kInvalidOptions,
                    "findAndModify with a sort or projection on attributes is not supported");
    std::vector<std::pair<std::string, Doc>> replacements = {{"query", query}};
    std::optional<Doc> update_doc = FindDocument(body, "update");
    if (FindBool(body, "upsert").value_or(false) && update_doc && IsOperatorUpdate(*update_doc) &&
        MentionsAttributeDeep(command_.body, "query"))
      return Refuse(error_codes::kInvalidOptions,
                    "upsert with a filter on attributes is not supported (the inserted document "
                    "would not get them)");
    if (std::optional<Doc> update = update_doc) {
      auto update_iter = ::remold::Find(body, "update");
      if (update_iter && BSON_ITER_HOLDS_ARRAY(&*update_iter))
        return Refuse(error_codes::kInvalidOptions, "pipeline updates are not supported");
      if (!IsOperatorUpdate(*update))
        if (auto reserved = NamesThePairArray(update->get(), "a replacement"))
          return Refuse(error_codes::kBadValue, *reserved);
      if (!IsOperatorUpdate(*update) && a_.StoresFlat()) {
        // stored as written
      } else if (!IsOperatorUpdate(*update)) {
        std::string error;
        replacements.emplace_back("update", FoldAttributes(a_, update->get(), &error));
        if (!error.empty()) return Refuse(error_codes::kBadValue, error);
      } else {
        Doc fixed;
        std::vector<AttributeOp> ops;
        if (auto refusal = SplitAttributeUpdate(a_, *update, fixed, ops))
          return Refuse(refusal->code, refusal->message);
        if (!ops.empty())
          return Refuse(error_codes::kInvalidOptions,
                        "findAndModify cannot change attributes; use updateOne, then find");
      }
    }
    Plan plan = Passed(Rebuilt(replacements));
    const AttributeRule rule = a_;
    plan.shape = [rule](std::span<const Doc> replies) {
      ShapedReply out;
      const Doc& reply = replies.front();
      bson_iter_t it;
      bson_iter_init(&it, reply.get());
      while (bson_iter_next(&it)) {
        std::string_view key = bson_iter_key(&it);
        if (key == "value" && BSON_ITER_HOLDS_DOCUMENT(&it) && rule.unfold) {
          Doc value = *FindDocument(reply.get(), "value");
          Doc unfolded = UnfoldAttributes(rule, value.get());
          if (Find(unfolded.get(), rule.array_field)) ++out.returned_as_stored;
          AppendDoc(out.reply.mut(), "value", unfolded);
        } else {
          AppendValue(out.reply.mut(), key, it);
        }
      }
      return out;
    };
    return plan;
  }

  const Command& command_;
  const RuleContext& rule_;
  const AttributeRule& a_;
  int32_t max_document_size_;  // the backend's maxBsonObjectSize
};

}  // namespace

BackendCommand EnsureAttributeIndex(const AttributeRule& rule) {
  Doc key, index;
  BSON_APPEND_INT32(key.mut(), (rule.array_field + "." + rule.key_name).c_str(), 1);
  BSON_APPEND_INT32(key.mut(), (rule.array_field + "." + rule.value_name).c_str(), 1);
  AppendDoc(index.mut(), "key", key);
  AppendString(index.mut(), "name", "remold_attribute_" + rule.array_field);
  BackendCommand command;
  AppendString(command.body.mut(), "createIndexes", rule.logical.collection);
  AppendArray(command.body.mut(), "indexes", {index});
  AppendString(command.body.mut(), "$db", rule.logical.db);
  // Reads and updates ensure it too; none of them may create the collection.
  command.skip_if_collection_missing = true;
  return command;
}

std::optional<Plan> RewritePattern(const Command& command, const RuleContext& rule,
                                   const AttributeRule& attribute, const Capabilities& capabilities) {
  return AttributeRewriter(command, rule, attribute, capabilities.max_bson_object_size).Rewrite();
}

std::vector<Doc> ViewStages(const AttributeRule& rule) {
  if (!rule.unfold) return {};  // the application reads the pairs as stored
  return UnfoldStages(rule);
}

}  // namespace remold
