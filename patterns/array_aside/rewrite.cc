#include "patterns/array_aside/rewrite.h"

#include <string>
#include <utility>
#include <vector>

#include "patterns/array_aside/assembly.h"
#include "patterns/array_aside/writes.h"
#include "rewrite/aggregate_pipeline.h"
#include "rewrite/count_reply.h"
#include "rewrite/cursor_reply.h"
#include "rewrite/distinct_reply.h"
#include "rewrite/filter_clauses.h"
#include "rewrite/find_as_aggregate.h"
#include "rewrite/one_document_delete.h"

namespace remold {
namespace {

std::string_view FirstComponent(std::string_view path) { return path.substr(0, path.find('.')); }

// The documents of a cursor reply's first batch, from a find or an aggregate.
std::optional<Doc> Id(const bson_t* document) {
  auto id = Find(document, "_id");
  if (!id) return std::nullopt;
  Doc out;
  AppendValue(out.mut(), "_id", *id);
  return out;
}

class AsideRewriter {
 public:
  AsideRewriter(const Command& command, const RuleContext& rule, const AsideLayout& layout, const Capabilities& caps)
      : command_(command), rule_(rule), o_(layout), caps_(caps) {}

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
    if (name == "drop") return Drop();
    if (name == "createIndexes") return CreateIndexes();
    return std::nullopt;  // the catalog: about the collection as stored
  }

 private:
  std::string Who() const { return o_.pattern + " rule '" + rule_.name + "' for " + o_.logical.full(); }

  Plan Refuse(ErrorCode code, const std::string& what) const { return ImmediateReply(ErrorReply(code, Who() + ": " + what)); }

  // Whether a path has a component that is a number ("buyers.4.u").
  static bool NamesPosition(std::string_view path) {
    size_t start = 0;
    while (start <= path.size()) {
      size_t end = path.find('.', start);
      if (end == std::string_view::npos) end = path.size();
      std::string_view part = path.substr(start, end - start);
      if (!part.empty() && part.find_first_not_of("0123456789") == std::string_view::npos) return true;
      start = end + 1;
    }
    return false;
  }

  // Whether a top-level path names the array or the marker.
  bool NamesArray(std::string_view path) const {
    std::string_view first = FirstComponent(path);
    return first == o_.array || first == o_.marker;
  }

  // The clauses of `filter` that select the same documents stored as
  // whole: those on other fields than the array.
  Doc PassingClauses(const Doc& filter) const {
    std::vector<Doc> clauses, kept;
    TopLevelClauses(filter.get(), clauses);
    for (Doc& clause : clauses) {
      std::string_view key = FirstKey(clause.get());
      if (key.empty() || key[0] == '$' || NamesArray(key)) continue;
      kept.push_back(std::move(clause));
    }
    return JoinClauses(std::move(kept));
  }

  bool Passes(const Doc& filter) const {
    std::vector<Doc> clauses;
    TopLevelClauses(filter.get(), clauses);
    return JoinClauses(std::move(clauses)) == PassingClauses(filter);
  }

  // Whether `doc` (a filter, a sort, an update's operators) names the
  // marker anywhere at its top or one level down.
  bool NamesMarker(const Doc& doc) const {
    bool named = false;
    bson_iter_t it;
    bson_iter_init(&it, doc.get());
    while (bson_iter_next(&it)) {
      std::string_view key = bson_iter_key(&it);
      if (FirstComponent(key) == o_.marker) named = true;
      if (key.starts_with("$") && BSON_ITER_HOLDS_DOCUMENT(&it))
        ForEachChild(it, [&](std::string_view path, const bson_iter_t& value) {
          if (FirstComponent(path) == o_.marker) named = true;
          if (BSON_ITER_HOLDS_UTF8(&value) && key == "$rename" &&
              FirstComponent(bson_iter_utf8(&value, nullptr)) == o_.marker)
            named = true;
        });
    }
    return named;
  }

  Doc MarkerRefusalReply() const {
    return ErrorReply(error_codes::kBadValue,
                      Who() + ": '" + o_.marker + "' is where remold keeps the rest of '" + o_.array +
                          "'; no document, filter, update, sort or projection may name it");
  }

  // --- Reads ---------------------------------------------------------------

  // The $match before the view for a read filtering on `filter`: documents
  // without overflow by the filter itself, overflowed ones by the clauses
  // not on the array, which stay at the top for both.
  std::vector<Doc> BeforeView(const Doc& filter) const {
    if (filter.empty()) return {};
    if (Passes(filter)) return {Stage("$match", filter)};
    // The filter is exact on documents without overflow, and selects a part
    // of the others: every overflowed one goes on to the view (an index
    // serves each side of the $or).
    Doc either;
    AppendArray(either.mut(), "$or", {filter, MarkedFilter(o_)});
    return {Stage("$match", Beside(PassingClauses(filter), either))};
  }

  BackendCommand ReadAggregate(const Doc& filter, std::vector<Doc> after) const {
    std::vector<Doc> pipeline = BeforeView(filter);
    for (Doc& stage : AsideViewStages(o_)) pipeline.push_back(std::move(stage));
    if (!filter.empty() && !Passes(filter)) pipeline.push_back(Stage("$match", filter));
    for (Doc& stage : after) pipeline.push_back(std::move(stage));
    BackendCommand backend;
    bson_t* out = backend.body.mut();
    AppendString(out, "aggregate", o_.logical.collection);
    AppendArray(out, "pipeline", pipeline);
    AppendDoc(out, "cursor", Doc());
    for (const char* passthrough : {"collation", "hint"}) {
      if (auto v = Find(command_.body.get(), passthrough)) AppendValue(out, passthrough, *v);
    }
    SealCommand(command_, ArgumentTarget::kRead, o_.logical.db, out);
    return backend;
  }

  // The projection of a find that returns no part of the array, as sent
  // to the stored documents (the marker left out too); nullopt when the
  // find returns the array or may compute from it.
  std::optional<Doc> ProjectionWithoutArray(const std::optional<Doc>& projection) const {
    if (!projection || projection->empty()) return std::nullopt;
    bool inclusion = false, excludes_array = false;
    bson_iter_t it;
    bson_iter_init(&it, projection->get());
    while (bson_iter_next(&it)) {
      std::string_view key = bson_iter_key(&it);
      if (!BSON_ITER_HOLDS_NUMBER(&it) && !BSON_ITER_HOLDS_BOOL(&it)) return std::nullopt;  // may compute
      if (FirstComponent(key) == o_.marker) return std::nullopt;
      const bool kept = bson_iter_as_bool(&it);
      if (key == o_.array && !kept) excludes_array = true;
      if (key != "_id" && kept) {
        inclusion = true;
        if (FirstComponent(key) == o_.array) return std::nullopt;
      }
    }
    if (inclusion) return projection;
    if (!excludes_array) return std::nullopt;
    Doc out = *projection;
    BSON_APPEND_INT32(out.mut(), o_.marker.c_str(), 0);
    return out;
  }

  // The stages standing for a find projection with $slice on top-level
  // fields (how an application pages through the array): each sliced where
  // it is, then the rest of the projection with the sliced fields kept.
  // nullopt for a projection without them, or with one the stages cannot
  // say ($elemMatch, positional, $slice of a sub-field or malformed).
  static std::optional<std::vector<Doc>> SliceStages(const std::optional<Doc>& projection) {
    if (!projection) return std::nullopt;
    Doc sliced, rest;
    std::vector<std::string> kept;
    bool inclusion = false;
    bson_iter_t it;
    bson_iter_init(&it, projection->get());
    while (bson_iter_next(&it)) {
      const std::string key = bson_iter_key(&it);
      std::optional<Doc> spec = BSON_ITER_HOLDS_DOCUMENT(&it) ? FindDocument(projection->get(), key) : std::nullopt;
      if (key.ends_with(".$") || (spec && FirstKey(spec->get()) == "$elemMatch")) return std::nullopt;  // find-only
      if (!spec || FirstKey(spec->get()) != "$slice") {
        if (BSON_ITER_HOLDS_DOCUMENT(&it) || BSON_ITER_HOLDS_UTF8(&it) || (key != "_id" && bson_iter_as_bool(&it)))
          inclusion = inclusion || key != "_id";
        AppendValue(rest.mut(), key, it);
        continue;
      }
      auto args = Find(spec->get(), "$slice");
      if (key.find('.') != std::string::npos || key.starts_with("$") || bson_count_keys(spec->get()) != 1 ||
          !bson_utf8_validate(key.data(), key.size(), false))
        return std::nullopt;
      std::vector<int64_t> numbers;
      if (BSON_ITER_HOLDS_NUMBER(&*args)) {
        numbers.push_back(bson_iter_as_int64(&*args));
      } else if (BSON_ITER_HOLDS_ARRAY(&*args)) {
        ForEachChild(*args, [&](std::string_view, const bson_iter_t& n) {
          numbers.push_back(BSON_ITER_HOLDS_NUMBER(&n) ? bson_iter_as_int64(&n) : 0);
        });
        if (numbers.size() != 2 || numbers[1] <= 0) return std::nullopt;
      } else {
        return std::nullopt;
      }
      // Both branches valid on any value (docs/backends.md, departure 1).
      std::string call = R"([{"$cond": [{"$isArray": )" + JsonQuote("$" + key) + "}, " + JsonQuote("$" + key) + ", []]}";
      for (int64_t n : numbers) call += ", {\"$numberLong\": \"" + std::to_string(n) + "\"}";
      call += "]";
      std::optional<Doc> expression = Doc::FromJson(R"({"$cond": [{"$isArray": )" + JsonQuote("$" + key) +
                                                    R"(}, {"$slice": )" + call + "}, " + JsonQuote("$" + key) + "]}");
      if (!expression) return std::nullopt;
      // Into a field of remold's first, then onto the field: DocumentDB
      // moves an $addFields that overwrites a field before the $match that
      // reads it when a $sort stands between them (docs/backends.md).
      AppendDoc(sliced.mut(), "_remold_slice_" + std::to_string(kept.size()), *expression);
      kept.push_back(key);
    }
    if (kept.empty()) return std::nullopt;
    Doc placed;
    for (size_t i = 0; i < kept.size(); ++i) AppendString(placed.mut(), kept[i], "$_remold_slice_" + std::to_string(i));
    std::vector<Doc> stages{Stage("$addFields", sliced), Stage("$addFields", placed)};
    if (inclusion) {
      for (const std::string& key : kept) BSON_APPEND_INT32(rest.mut(), key.c_str(), 1);
    } else {
      for (size_t i = 0; i < kept.size(); ++i) BSON_APPEND_INT32(rest.mut(), ("_remold_slice_" + std::to_string(i)).c_str(), 0);
    }
    stages.push_back(Stage("$project", rest));
    return stages;
  }

  // The projection of a find that returns the array whole as sent to the
  // stored documents, the marker kept (empty: none); nullopt for one that
  // projects inside the array or computes.
  std::optional<Doc> ProjectionKeepingMarker(const std::optional<Doc>& projection) const {
    if (!projection || projection->empty()) return Doc();
    bool inclusion = false;
    bson_iter_t it;
    bson_iter_init(&it, projection->get());
    while (bson_iter_next(&it)) {
      std::string_view key = bson_iter_key(&it);
      if (!BSON_ITER_HOLDS_NUMBER(&it) && !BSON_ITER_HOLDS_BOOL(&it)) return std::nullopt;
      if (NamesArray(key) && key != o_.array) return std::nullopt;  // inside the array, or the marker
      if (key != "_id" && bson_iter_as_bool(&it)) inclusion = true;
    }
    if (!inclusion) return projection;  // exclusion keeping the array keeps the marker too
    Doc out = *projection;
    BSON_APPEND_INT32(out.mut(), o_.marker.c_str(), 1);
    return out;
  }

  // A getMore of a find sent as it is: its documents made whole (those of
  // an aggregate's cursor, made by the view, hold no marker).
  std::optional<Plan> GetMore() const {
    BackendCommand backend;
    backend.body = command_.body;
    return WithDocumentsMadeWhole(Forwarded(std::move(backend)), command_, rule_.name, o_, caps_.max_bson_object_size);
  }

  std::optional<Plan> FindCommand() const {
    const bson_t* body = command_.body.get();
    const Doc filter = FindDocument(body, "filter").value_or(Doc());
    std::optional<Doc> sort = FindDocument(body, "sort");
    if (NamesMarker(filter) || (sort && NamesMarker(*sort))) return ImmediateReply(MarkerRefusalReply());
    if (Passes(filter) && (!sort || Passes(*sort))) {
      const std::optional<Doc> projection = FindDocument(body, "projection");
      if (std::optional<Doc> without = ProjectionWithoutArray(projection)) {
        BackendCommand backend;
        backend.body = WithDocument(command_.body, "projection", *without);
        return Forwarded(std::move(backend));
      }
      // The documents it selects are those stored: read as they are, the
      // overflowed ones among them made whole after.
      if (std::optional<Doc> keeping = ProjectionKeepingMarker(projection)) {
        BackendCommand backend;
        backend.body = keeping->empty() ? command_.body : WithDocument(command_.body, "projection", *keeping);
        return WithDocumentsMadeWhole(Forwarded(std::move(backend)), command_, rule_.name, o_, caps_.max_bson_object_size);
      }
    }
    FindPipeline parts;
    parts.before_view = BeforeView(filter);
    parts.view = AsideViewStages(o_);
    if (!Passes(filter)) parts.after_view = filter;
    parts.projection_stages = SliceStages(FindDocument(body, "projection"));
    auto aggregate = FindAsAggregate(command_, o_.logical, std::move(parts), "on this " + o_.pattern + " rule's collection");
    if (auto* refusal = std::get_if<Refusal>(&aggregate)) return Refuse(refusal->code, refusal->message);
    AggregateFind& find = std::get<AggregateFind>(aggregate);
    Plan plan = Forwarded(std::move(find.command));
    if (find.single_batch) plan.shape = SingleBatchShape(o_.logical);
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
      std::string_view stage = FirstKey(stages[0].get());
      // About the collection or its change events, not its documents.
      if (IsAboutTheCollection(stage)) return std::nullopt;
      // Must stay first; the documents they produce are made whole after.
      if (MustStayFirst(stage)) {
        // $geoNear's query runs on the documents as stored, before the view.
        std::optional<Doc> spec = FindDocument(stages[0].get(), stage);
        std::optional<Doc> query = spec ? FindDocument(spec->get(), "query") : std::nullopt;
        if (query && NamesMarker(*query)) return ImmediateReply(MarkerRefusalReply());
        if (query && !Passes(*query))
          return Refuse(error_codes::kInvalidOptions,
                        "a $geoNear query on '" + o_.array + "' would miss the elements stored aside; put that "
                        "condition in a $match after the $geoNear");
        pipeline.push_back(stages[0]);
        i = 1;
      }
    }
    // The client's first $match, before the view, selects what it can.
    if (i < stages.size()) {
      if (std::optional<Doc> match = FindDocument(stages[i].get(), "$match")) {
        if (NamesMarker(*match)) return ImmediateReply(MarkerRefusalReply());
        for (Doc& stage : BeforeView(*match)) pipeline.push_back(std::move(stage));
      }
    }
    for (Doc& stage : AsideViewStages(o_)) pipeline.push_back(std::move(stage));
    for (; i < stages.size(); ++i) pipeline.push_back(std::move(stages[i]));
    return Forwarded(WithPipeline(command_.body.get(), pipeline));
  }

  std::optional<Plan> Count() const {
    const bson_t* body = command_.body.get();
    const Doc query = FindDocument(body, "query").value_or(Doc());
    if (NamesMarker(query)) return ImmediateReply(MarkerRefusalReply());
    if (Passes(query)) return std::nullopt;  // the same documents match stored
    Plan plan = Forwarded(ReadAggregate(query, CountStages(body)));
    plan.shape = CountReply;
    return plan;
  }

  std::optional<Plan> Distinct() const {
    const bson_t* body = command_.body.get();
    const Doc query = FindDocument(body, "query").value_or(Doc());
    std::optional<std::string> key = FindString(body, "key");
    if (!key) return std::nullopt;  // the server says what is wrong
    if (NamesMarker(query) || FirstComponent(*key) == o_.marker) return ImmediateReply(MarkerRefusalReply());
    if (NamesArray(*key) && NamesPosition(*key))
      return Refuse(error_codes::kInvalidOptions,
                    "distinct of '" + *key + "', a position in '" + o_.array + "', is not supported: the values "
                    "are read through the view, where a number in a path names a field, not a position");
    if (!NamesArray(*key) && Passes(query)) return std::nullopt;
    Plan plan = Forwarded(ReadAggregate(query, DistinctStages(*key)));
    plan.shape = [](std::span<const Doc> replies) {
      if (!IsOkReply(replies.front())) return ShapedReply{replies.front(), {}, {}, {}, {}, {}};
      return ShapedReply{DistinctReply(replies), {}, {}, {}, {}, {}};
    };
    return plan;
  }

  // --- Writes --------------------------------------------------------------

  // The one collation of the statements whose documents are read before the
  // write (the read runs under one): set from the first, a refusal for a
  // later statement with another.
  struct ReadCollation {
    bool set = false;
    std::optional<Doc> value;
  };
  std::optional<Plan> SameCollation(ReadCollation& read, const Doc& statement) const {
    std::optional<Doc> collation = FindDocument(statement.get(), "collation");
    if (!read.set) {
      read = {true, collation};
      return std::nullopt;
    }
    if (read.value == collation) return std::nullopt;
    return Refuse(error_codes::kInvalidOptions,
                  "statements selecting by '" + o_.array + "' or changing it with different collations in one "
                  "command: send them in separate commands");
  }

  // The number of elements of the array `document` holds as written (-1:
  // not an array).
  int64_t ArrayLength(const bson_t* document) const {
    auto array = Find(document, o_.array);
    if (!array || !BSON_ITER_HOLDS_ARRAY(&*array)) return -1;
    int64_t n = 0;
    ForEachChild(*array, [&](std::string_view, const bson_iter_t&) { ++n; });
    return n;
  }

  // {_id: {$in: [...]}} of documents that hold more than `first`
  // elements; nullopt when none does (or one has no _id to find it by:
  // it stays whole, which reads right).
  std::optional<Doc> Overlong(const std::vector<Doc>& documents) const {
    std::vector<Doc> overlong;
    for (const Doc& document : documents)
      if (ArrayLength(document.get()) > o_.first)
        if (Find(document.get(), "_id")) overlong.push_back(document);
    if (overlong.empty()) return std::nullopt;
    return IdIn(overlong);
  }

  std::optional<Plan> Insert() const {
    auto documents = Find(command_.body.get(), "documents");
    if (!documents || !BSON_ITER_HOLDS_ARRAY(&*documents))
      return ImmediateReply(ErrorReply(error_codes::kFailedToParse, "insert needs a 'documents' array"));
    const std::vector<Doc> inserted = ArrayDocuments(*documents);
    for (const Doc& document : inserted)
      if (Find(document.get(), o_.marker)) return ImmediateReply(MarkerRefusalReply());
    std::optional<Doc> overlong = Overlong(inserted);
    if (!overlong || o_.to_flat) {  // stored as written (a plan: its ensure makes the overflow collection)
      BackendCommand backend;
      backend.body = command_.body;
      return Forwarded(std::move(backend));
    }
    AsideWrite write;
    write.write.body = command_.body;
    write.written = [overlong = *overlong](const Doc&) -> std::optional<Doc> { return overlong; };
    return AsideWritePlan(command_, rule_.name, o_, std::move(write));
  }

  // Whether an update document ($-operators, a replacement, a pipeline)
  // may change the array.
  bool ChangesArray(const bson_iter_t& u) const {
    if (!BSON_ITER_HOLDS_DOCUMENT(&u)) return true;  // a pipeline
    bool changes = false;
    bool operators = false;
    ForEachChild(u, [&](std::string_view op, const bson_iter_t& spec) {
      if (!op.starts_with("$")) return;
      operators = true;
      if (!BSON_ITER_HOLDS_DOCUMENT(&spec)) return;
      ForEachChild(spec, [&](std::string_view path, const bson_iter_t& value) {
        if (FirstComponent(path) == o_.array) changes = true;
        if (op == "$rename" && BSON_ITER_HOLDS_UTF8(&value) && FirstComponent(bson_iter_utf8(&value, nullptr)) == o_.array)
          changes = true;
      });
    });
    return changes || !operators;  // a replacement replaces the array too
  }

  // The update with its $push onto the array made a push onto the tail,
  // when that is all it does to the array: {$push: {<array>: v}} or
  // {$push: {<array>: {$each: [...]}}} beside operators on other fields.
  std::optional<Doc> TailUpdate(const Doc& u) const {
    std::optional<Doc> push = FindDocument(u.get(), "$push");
    auto value = push ? Find(push->get(), o_.array) : std::nullopt;
    if (!value) return std::nullopt;
    if (BSON_ITER_HOLDS_DOCUMENT(&*value)) {
      const Doc spec = *FindDocument(push->get(), o_.array);
      const std::string_view first = FirstKey(spec.get());
      const bool modifiers = first.starts_with("$");
      auto each = Find(spec.get(), "$each");
      // $position, $slice, $sort: the whole array decides where or what.
      if (modifiers && (first != "$each" || bson_count_keys(spec.get()) != 1 || !BSON_ITER_HOLDS_ARRAY(&*each)))
        return std::nullopt;
    }
    Doc out;
    bool elsewhere = false;
    bson_iter_t op;
    bson_iter_init(&op, u.get());
    while (bson_iter_next(&op)) {
      const std::string_view name = bson_iter_key(&op);
      if (name != "$push") {
        if (BSON_ITER_HOLDS_DOCUMENT(&op))
          ForEachChild(op, [&](std::string_view path, const bson_iter_t& target) {
            if (FirstComponent(path) == o_.array) elsewhere = true;
            if (name == "$rename" && BSON_ITER_HOLDS_UTF8(&target) &&
                FirstComponent(bson_iter_utf8(&target, nullptr)) == o_.array)
              elsewhere = true;
          });
        AppendValue(out.mut(), name, op);
        continue;
      }
      Doc pushes;
      ForEachChild(op, [&](std::string_view path, const bson_iter_t& pushed) {
        if (path == o_.array && PushesNothing(pushed)) {
          // {$each: []}: onto the document's own array, which a marked
          // document has, it changes nothing (a tail would be made).
          AppendValue(pushes.mut(), path, pushed);
        } else if (path == o_.array) {
          AppendValue(pushes.mut(), o_.marker + ".tail", pushed);
          if (!o_.ArrayStartsWhole() && o_.latest > 0) AppendDoc(pushes.mut(), o_.array, LatestCopyPush(pushed));
        } else {
          if (FirstComponent(path) == o_.array) elsewhere = true;  // a push into an element
          AppendValue(pushes.mut(), path, pushed);
        }
      });
      AppendDoc(out.mut(), "$push", pushes);
    }
    if (elsewhere) return std::nullopt;
    return out;
  }

  // Whether a $push's value is {$each: []}.
  static bool PushesNothing(const bson_iter_t& pushed) {
    if (!BSON_ITER_HOLDS_DOCUMENT(&pushed)) return false;
    Doc boxed;
    AppendValue(boxed.mut(), "v", pushed);
    std::optional<Doc> spec = FindDocument(boxed.get(), "v");
    auto each = spec && FirstKey(spec->get()) == "$each" ? Find(spec->get(), "$each") : std::nullopt;
    if (!each || !BSON_ITER_HOLDS_ARRAY(&*each)) return false;
    bool empty = true;
    ForEachChild(*each, [&](std::string_view, const bson_iter_t&) { empty = false; });
    return empty;
  }

  // The push that keeps the document's copy of the latest elements:
  // {$each: [<pushed>...], $slice: -latest}.
  Doc LatestCopyPush(const bson_iter_t& pushed) const {
    Doc boxed, spec;
    AppendValue(boxed.mut(), "v", pushed);
    std::optional<Doc> each_spec = BSON_ITER_HOLDS_DOCUMENT(&pushed) ? FindDocument(boxed.get(), "v") : std::nullopt;
    auto each = each_spec && FirstKey(each_spec->get()) == "$each" ? Find(each_spec->get(), "$each") : std::nullopt;
    if (each) {
      AppendValue(spec.mut(), "$each", *each);
    } else {
      bson_t array;
      BSON_APPEND_ARRAY_BEGIN(spec.mut(), "$each", &array);
      AppendValue(&array, "0", pushed);
      bson_append_array_end(spec.mut(), &array);
    }
    BSON_APPEND_INT32(spec.mut(), "$slice", -o_.latest);
    return spec;
  }

  // How many elements an update TailUpdate takes pushes onto the array.
  int64_t PushedCount(const Doc& u) const {
    std::optional<Doc> push = FindDocument(u.get(), "$push");
    auto value = Find(push->get(), o_.array);
    if (!BSON_ITER_HOLDS_DOCUMENT(&*value)) return 1;
    std::optional<Doc> spec = FindDocument(push->get(), o_.array);
    auto each = FirstKey(spec->get()) == "$each" ? Find(spec->get(), "$each") : std::nullopt;
    if (!each) return 1;  // a document pushed as it is
    int64_t n = 0;
    ForEachChild(*each, [&](std::string_view, const bson_iter_t&) { ++n; });
    return n;
  }

  // Whether a filter pins _id to one value: at most one document matches.
  static bool PinsId(const Doc& filter) {
    std::vector<Doc> clauses;
    TopLevelClauses(filter.get(), clauses);
    for (const Doc& clause : clauses) {
      if (FirstKey(clause.get()) != "_id") continue;
      auto value = Find(clause.get(), "_id");
      if (BSON_ITER_HOLDS_REGEX(&*value)) continue;
      if (!BSON_ITER_HOLDS_DOCUMENT(&*value)) return true;
      std::optional<Doc> condition = FindDocument(clause.get(), "_id");
      if (FirstKey(condition->get()) == "$eq" && bson_count_keys(condition->get()) == 1) return true;
      if (!FirstKey(condition->get()).starts_with("$")) return true;  // an embedded document _id
    }
    return false;
  }

  // The documents of a write's statements that may now hold more than
  // `first` elements: those their filters' clauses not on the array
  // select, and those upserted; with a statement whose filter says nothing
  // else (`selects_all`), every document that needs it (a round at a time).
  static std::function<std::optional<Doc>(const Doc&)> WrittenBy(std::vector<Doc> selecting, bool selects_all) {
    return [selecting = std::move(selecting), selects_all](const Doc& reply) -> std::optional<Doc> {
      if (selects_all) return Doc();
      std::vector<Doc> any = selecting;
      if (auto upserted = Find(reply.get(), "upserted"); upserted && BSON_ITER_HOLDS_ARRAY(&*upserted)) {
        std::vector<Doc> ids;
        for (const Doc& entry : ArrayDocuments(*upserted))
          if (auto id = Id(entry.get())) ids.push_back(std::move(*id));
        if (!ids.empty()) any.push_back(IdIn(ids));
      }
      if (any.empty()) return std::nullopt;
      if (any.size() == 1) return any.front();
      Doc out;
      AppendArray(out.mut(), "$or", any);
      return out;
    };
  }

  std::optional<Plan> Update() const {
    auto updates = Find(command_.body.get(), "updates");
    if (!updates || !BSON_ITER_HOLDS_ARRAY(&*updates))
      return ImmediateReply(ErrorReply(error_codes::kFailedToParse, "update needs an 'updates' array"));
    const std::vector<Doc> statements = ArrayDocuments(*updates);
    std::vector<Doc> sent, fold_filters, selecting;
    ReadCollation read_collation;
    bool rewritten = false;
    bool selects_all = false;
    // The statements before a rewritten one may change which documents it
    // matches; the fold reads before any runs. A document a statement
    // matches once earlier ones ran either matched it as it was, or was
    // changed by an earlier statement, the first of which matched it as
    // it was: so the fold takes the marked documents that any statement up
    // to the last rewritten one matches as they are.
    size_t folded = 0;  // statements whose filters the fold has
    for (size_t i = 0; i < statements.size(); ++i) {
      const Doc& statement = statements[i];
      const Doc filter = FindDocument(statement.get(), "q").value_or(Doc());
      auto u = Find(statement.get(), "u");
      if (!u) return ImmediateReply(ErrorReply(error_codes::kFailedToParse, "update statement needs 'u'"));
      if (NamesMarker(filter)) return ImmediateReply(MarkerRefusalReply());
      if (BSON_ITER_HOLDS_DOCUMENT(&*u)) {
        const Doc update = *FindDocument(statement.get(), "u");
        if (NamesMarker(update)) return ImmediateReply(MarkerRefusalReply());
      }
      if (Passes(filter) && !ChangesArray(*u)) {
        sent.push_back(statement);  // the marker and the pages stay as they are
        continue;
      }
      rewritten = true;
      if (statements.size() == 1 && BSON_ITER_HOLDS_DOCUMENT(&*u) && Passes(filter) && PinsId(filter) &&
          !FindBool(statement.get(), "multi").value_or(false)) {
        const Doc update = *FindDocument(statement.get(), "u");
        if (std::optional<Doc> tail = TailUpdate(update))
          return AsideAppendPlan(command_, rule_.name, o_, statement, filter, *tail, PushedCount(update));
      }
      for (; folded <= i; ++folded) {
        const Doc& before = statements[folded];
        const Doc matched = FindDocument(before.get(), "q").value_or(Doc());
        fold_filters.push_back(matched);
        if (std::optional<Plan> refused = SameCollation(read_collation, before)) return refused;
        Doc selects = PassingClauses(matched);
        if (selects.empty()) selects_all = true;
        else selecting.push_back(std::move(selects));
      }
      sent.push_back(WithDocument(statement, "q", Beside(filter, UnmarkedFilter(o_))));
    }
    if (!rewritten) return std::nullopt;
    AsideWrite write;
    write.fold_filters = std::move(fold_filters);
    write.collation = read_collation.value;
    bson_copy_to_excluding_noinit(command_.body.get(), write.write.body.mut(), "updates", nullptr);
    write.write.sequence_id = "updates";
    write.write.sequence = std::move(sent);
    write.written = WrittenBy(std::move(selecting), selects_all);
    if (statements.size() == 1 && write.fold_filters.size() == 1 &&
        !FindBool(statements.front().get(), "multi").value_or(false)) {
      // One document: pinned to the one the filter selects (writes.h).
      const Doc body = write.write.body;
      const Doc statement = write.write.sequence.front();
      const Doc guarded = FindDocument(statement.get(), "q").value_or(Doc());
      write.pinned = [body, statement, guarded](const Doc& id) {
        Doc no;
        BSON_APPEND_BOOL(no.mut(), "v", false);
        BackendCommand pinned;
        pinned.body = body;
        pinned.sequence_id = "updates";
        pinned.sequence = {WithField(WithDocument(statement, "q", Beside(guarded, id)), "upsert", Unboxed(no))};
        return pinned;
      };
      write.matched = [](const Doc& reply) { return FindInteger(reply.get(), "n").value_or(0) > 0; };
    }
    return AsideWritePlan(command_, rule_.name, o_, std::move(write));
  }

  std::optional<Plan> Delete() const {
    auto deletes = Find(command_.body.get(), "deletes");
    if (!deletes || !BSON_ITER_HOLDS_ARRAY(&*deletes))
      return ImmediateReply(ErrorReply(error_codes::kFailedToParse, "delete needs a 'deletes' array"));
    std::vector<Doc> sent, fold_filters, keyed;
    ReadCollation read_collation;
    for (const Doc& statement : ArrayDocuments(*deletes)) {
      const Doc filter = FindDocument(statement.get(), "q").value_or(Doc());
      if (NamesMarker(filter)) return ImmediateReply(MarkerRefusalReply());
      if (std::optional<Plan> refused = SameCollation(read_collation, statement)) return refused;
      if (Passes(filter)) {
        // Deleted as sent; the pages of what it deletes go after it.
        keyed.push_back(filter);
        sent.push_back(statement);
        continue;
      }
      fold_filters.push_back(filter);
      sent.push_back(OneDocumentDelete(command_, statement, WithDocument(statement, "q", Beside(filter, UnmarkedFilter(o_)))));
    }
    AsideWrite write;
    write.fold_filters = std::move(fold_filters);
    write.collation = read_collation.value;
    if (!keyed.empty()) {
      Doc any;
      if (keyed.size() == 1) any = keyed.front();
      else AppendArray(any.mut(), "$or", keyed);
      write.keys_of = std::move(any);
    }
    bson_copy_to_excluding_noinit(command_.body.get(), write.write.body.mut(), "deletes", nullptr);
    write.write.sequence_id = "deletes";
    write.write.sequence = std::move(sent);
    if (write.write.sequence.size() == 1 && write.fold_filters.size() == 1 &&
        FindInteger(write.write.sequence.front().get(), "limit").value_or(0) == 1) {
      // One document: pinned to the one the filter selects (writes.h).
      const Doc body = write.write.body;
      const Doc statement = write.write.sequence.front();
      const Doc guarded = FindDocument(statement.get(), "q").value_or(Doc());
      write.pinned = [body, statement, guarded](const Doc& id) {
        BackendCommand pinned;
        pinned.body = body;
        pinned.sequence_id = "deletes";
        pinned.sequence = {WithDocument(statement, "q", Beside(guarded, id))};
        return pinned;
      };
      write.matched = [](const Doc& reply) { return FindInteger(reply.get(), "n").value_or(0) > 0; };
    }
    return AsideWritePlan(command_, rule_.name, o_, std::move(write));
  }

  std::optional<Plan> FindAndModify() const {
    const bson_t* body = command_.body.get();
    const Doc query = FindDocument(body, "query").value_or(Doc());
    if (NamesMarker(query)) return ImmediateReply(MarkerRefusalReply());
    if (auto update = Find(body, "update"); update && BSON_ITER_HOLDS_DOCUMENT(&*update))
      if (NamesMarker(*FindDocument(body, "update"))) return ImmediateReply(MarkerRefusalReply());
    if (auto sort = FindDocument(body, "sort"); sort && NamesMarker(*sort)) return ImmediateReply(MarkerRefusalReply());
    // The document it returns is whole: overflowed ones it may match are
    // stored whole first.
    AsideWrite write;
    write.fold_filters = {query};
    write.collation = FindDocument(body, "collation");
    write.write.body = WithDocument(command_.body, "query", Beside(query, UnmarkedFilter(o_)));
    write.written = [](const Doc& reply) -> std::optional<Doc> {
      std::optional<Doc> last = FindDocument(reply.get(), "lastErrorObject");
      if (last)
        if (auto upserted = Find(last->get(), "upserted")) {
          Doc id;
          AppendValue(id.mut(), "_id", *upserted);
          return id;
        }
      if (std::optional<Doc> value = FindDocument(reply.get(), "value")) return Id(value->get());
      return std::nullopt;
    };
    // Pinned to the one document it selects (writes.h), in its sort order.
    write.sort = FindDocument(body, "sort");
    const Doc sent = write.write.body;
    write.pinned = [sent](const Doc& id) {
      Doc no;
      BSON_APPEND_BOOL(no.mut(), "v", false);
      BackendCommand pinned;
      pinned.body = WithField(WithDocument(sent, "query", Beside(FindDocument(sent.get(), "query").value_or(Doc()), id)),
                              "upsert", Unboxed(no));
      return pinned;
    };
    write.matched = [](const Doc& reply) {
      // The document it found (before or after), or one it upserted; not
      // lastErrorObject.n, which DocumentDB leaves 0 for a match changed by
      // nothing.
      auto value = Find(reply.get(), "value");
      if (value && BSON_ITER_HOLDS_DOCUMENT(&*value)) return true;
      std::optional<Doc> last = FindDocument(reply.get(), "lastErrorObject");
      return last && (Find(last->get(), "upserted") || FindInteger(last->get(), "n").value_or(0) > 0);
    };
    return AsideWritePlan(command_, rule_.name, o_, std::move(write));
  }

  // Refused: a unique index whose key names the array (its elements
  // stored aside are not in it, so it could not refuse their duplicates).
  // Any other is built as asked.
  std::optional<Plan> CreateIndexes() const {
    auto indexes = Find(command_.body.get(), "indexes");
    if (!indexes || !BSON_ITER_HOLDS_ARRAY(&*indexes)) return std::nullopt;  // the server says what is wrong
    for (const Doc& index : ArrayDocuments(*indexes)) {
      if (!FindBool(index.get(), "unique").value_or(false)) continue;
      std::optional<Doc> key = FindDocument(index.get(), "key");
      if (!key) continue;
      bson_iter_t it;
      bson_iter_init(&it, key->get());
      while (bson_iter_next(&it))
        if (NamesArray(bson_iter_key(&it)))
          return Refuse(error_codes::kInvalidOptions,
                        "a unique index on '" + std::string(bson_iter_key(&it)) + "' is not supported: the "
                        "elements of '" + o_.array + "' stored aside are not in the collection's indexes");
    }
    return std::nullopt;
  }

  // The collection and its pages.
  std::optional<Plan> Drop() const {
    BackendCommand drop;
    drop.body = command_.body;
    Plan plan = Forwarded(std::move(drop));
    const Command client = command_;
    const AsideLayout rule = o_;
    plan.then = [client, rule](std::span<const Doc> replies) -> Step {
      if (!IsOkReply(replies.front())) return Step{};
      BackendCommand pages;
      AppendString(pages.body.mut(), "drop", rule.aside.collection);
      SealCommand(client, ArgumentTarget::kAdmin, rule.aside.db, pages.body.mut());
      pages.may_fail = true;
      return Step{{std::move(pages)}, {}};
    };
    plan.follow_ups = {"drop " + o_.aside.full() + ", where the rest of its arrays is stored"};
    return plan;
  }

  const Command& command_;
  const RuleContext& rule_;
  const AsideLayout& o_;
  const Capabilities& caps_;
};

// Whether an aggregate's last stage writes its output ($out, $merge).
bool EndsInOutput(const Command& command) {
  auto pipeline = Find(command.body.get(), "pipeline");
  if (!pipeline || !BSON_ITER_HOLDS_ARRAY(&*pipeline)) return false;
  const std::vector<Doc> stages = ArrayDocuments(*pipeline);
  if (stages.empty()) return false;
  const std::string_view last = FirstKey(stages.back().get());
  return last == "$out" || last == "$merge";
}

}  // namespace

std::optional<Plan> RewriteAside(const Command& command, const RuleContext& rule, const AsideLayout& layout,
                                 const Capabilities& caps) {
  std::optional<Plan> plan = AsideRewriter(command, rule, layout, caps).Rewrite();
  if (plan && !plan->immediate_reply) {
    // A write makes the overflow collection; so does an aggregate that ends
    // in $out or $merge, which some engines refuse (DocumentDB: 115) while
    // the view's $lookup names a collection not there yet.
    const bool writes = command.name == "insert" || command.name == "update" || command.name == "delete" ||
                        command.name == "findAndModify" || command.name == "findandmodify" ||
                        (command.name == "aggregate" && EndsInOutput(command));
    plan->ensure.push_back(EnsureMarkedIndex(layout));
    plan->ensure.push_back(EnsurePagesIndex(layout, writes));
    if (std::optional<BackendCommand> parent = EnsureParentIndex(layout, writes)) plan->ensure.push_back(std::move(*parent));
  }
  return plan;
}

}  // namespace remold
