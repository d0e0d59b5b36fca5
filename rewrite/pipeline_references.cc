#include "rewrite/pipeline_references.h"

#include <bson/bson.h>

#include <utility>

namespace remold {
namespace {

constexpr const char* kLocalVariable = "remold_local";

std::string_view Utf8(const bson_iter_t& it) {
  uint32_t length = 0;
  const char* value = bson_iter_utf8(&it, &length);
  return {value, length};
}

// The sub-document or array under `it`, as a bson_t that reads it in place.
bool Recurse(const bson_iter_t& it, bson_t* out) {
  uint32_t length = 0;
  const uint8_t* data = nullptr;
  if (BSON_ITER_HOLDS_DOCUMENT(&it)) bson_iter_document(&it, &length, &data);
  else if (BSON_ITER_HOLDS_ARRAY(&it)) bson_iter_array(&it, &length, &data);
  else return false;
  return bson_init_static(out, data, length);
}

// "name" or {db: "d", coll: "name"} (the spelling $out, $merge and, in
// MongoDB 8.0, $lookup accept for another database).
std::optional<Namespace> NamespaceValue(const bson_iter_t& it, std::string_view db,
                                        std::string_view collection_key) {
  if (BSON_ITER_HOLDS_UTF8(&it)) return Namespace{std::string(db), std::string(Utf8(it))};
  bson_t spec;
  if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !Recurse(it, &spec)) return std::nullopt;
  std::optional<std::string> collection = FindString(&spec, collection_key);
  if (!collection) return std::nullopt;
  std::optional<std::string> in_db = FindString(&spec, "db");
  return Namespace{in_db ? *in_db : std::string(db), *collection};
}


// The stages of an array document, in order.
std::vector<Doc> StagesOf(const bson_t* pipeline) {
  std::vector<Doc> stages;
  bson_iter_t it;
  if (!bson_iter_init(&it, pipeline)) return stages;
  while (bson_iter_next(&it)) {
    bson_t stage;
    if (Recurse(it, &stage)) stages.push_back(Doc::FromBson(&stage));
  }
  return stages;
}

// [value] as an expression: {$map: {input: [0], in: value}} (an array
// literal would do on MongoDB; not every server evaluates expressions
// inside one).
void AppendSingleton(bson_t* out, const char* key, const char* value) {
  bson_t* map = BCON_NEW("$map", "{", "input", "[", BCON_INT32(0), "]", "as", "remold_i", "in",
                         BCON_UTF8(value), "}");
  bson_append_document(out, key, -1, map);
  bson_destroy(map);
}

// The value as an array: itself when it is one, else [value]; with
// `keep_whole`, an array's elements and the array itself, [...value, value].
// Every operand is valid whatever the value's type, because not every
// server evaluates only the branch of $cond it takes (DocumentDB evaluates
// both, and $concatArrays of a string fails the whole query there):
//   {$cond: [{$isArray: value}, value, [value]]}, or with keep_whole
//   {$concatArrays: [{$cond: [{$isArray: value}, value, []]}, [value]]}
void AppendAsArray(bson_t* out, const char* key, const char* value, bool keep_whole) {
  bson_t cond, args, is_array, empty;
  auto append_cond = [&](bson_t* parent, const char* name, bool singleton_else) {
    bson_append_document_begin(parent, name, -1, &cond);
    bson_append_array_begin(&cond, "$cond", -1, &args);
    bson_append_document_begin(&args, "0", -1, &is_array);
    BSON_APPEND_UTF8(&is_array, "$isArray", value);
    bson_append_document_end(&args, &is_array);
    BSON_APPEND_UTF8(&args, "1", value);
    if (singleton_else) {
      AppendSingleton(&args, "2", value);
    } else {
      bson_append_document_begin(&args, "2", -1, &empty);
      bson_t none;
      bson_append_array_begin(&empty, "$literal", -1, &none);
      bson_append_array_end(&empty, &none);
      bson_append_document_end(&args, &empty);
    }
    bson_append_array_end(&cond, &args);
    bson_append_document_end(parent, &cond);
  };
  if (!keep_whole) {
    append_cond(out, key, true);
    return;
  }
  bson_t concat, concat_args;
  bson_append_document_begin(out, key, -1, &concat);
  bson_append_array_begin(&concat, "$concatArrays", -1, &concat_args);
  append_cond(&concat_args, "0", false);
  AppendSingleton(&concat_args, "1", value);
  bson_append_array_end(&concat, &concat_args);
  bson_append_document_end(out, &concat);
}

// {$match: {$expr: ...}}: the foreign document's `foreign_field` matches
// $$remold_local as $lookup's equality match does: an array on either side
// matches by any element (the foreign array also as a whole), and a
// missing value is null:
//   {$gt: [{$size: {$setIntersection: [<foreign as array>, <local as array>]}}, 0]}
Doc EqualityMatch(std::string_view foreign_field) {
  const std::string field = "$" + std::string(foreign_field);
  Doc sets;
  AppendAsArray(sets.mut(), "0", field.c_str(), true);
  AppendAsArray(sets.mut(), "1", "$$remold_local", false);
  Doc intersection, size, comparison, match, stage;
  bson_append_array(intersection.mut(), "$setIntersection", -1, sets.get());
  AppendDoc(size.mut(), "$size", intersection);
  bson_t gt;
  bson_append_array_begin(comparison.mut(), "$gt", -1, &gt);
  bson_append_document(&gt, "0", -1, size.get());
  BSON_APPEND_INT32(&gt, "1", 0);
  bson_append_array_end(comparison.mut(), &gt);
  AppendDoc(match.mut(), "$expr", comparison);
  AppendDoc(stage.mut(), "$match", match);
  return stage;
}

// {$ifNull: ["$<local_field>", null]}: the local value, null when missing
// ($lookup's equality reads a missing local field as null).
Doc LocalValue(std::string_view local_field) {
  const std::string field = "$" + std::string(local_field);
  bson_t* value = BCON_NEW("$ifNull", "[", BCON_UTF8(field.c_str()), BCON_NULL, "]");
  Doc doc = Doc::FromBson(value);
  bson_destroy(value);
  return doc;
}

class Walker {
 public:
  Walker(std::string_view db, const ViewLookup& view_of, std::vector<StageReference>& references)
      : db_(db), view_of_(view_of), references_(references) {}

  // The pipeline rewritten, or nullopt when no stage changed.
  std::optional<Doc> Pipeline(const bson_t* pipeline) {
    std::vector<std::pair<bson_iter_t, std::optional<Doc>>> stages;
    bool changed = false;
    bson_iter_t it;
    if (!bson_iter_init(&it, pipeline)) return std::nullopt;
    while (bson_iter_next(&it)) {
      std::optional<Doc> rewritten;
      bson_t stage;
      if (BSON_ITER_HOLDS_DOCUMENT(&it) && Recurse(it, &stage)) rewritten = Stage(&stage);
      changed = changed || rewritten.has_value();
      stages.emplace_back(it, std::move(rewritten));
    }
    if (!changed) return std::nullopt;
    Doc out;
    int index = 0;
    for (auto& [iter, rewritten] : stages) {
      const std::string key = std::to_string(index++);
      if (rewritten) AppendDoc(out.mut(), key, *rewritten);
      else AppendValue(out.mut(), key, iter);
    }
    return out;
  }

 private:
  std::optional<Doc> Stage(const bson_t* stage) {
    bson_iter_t it;
    if (!bson_iter_init(&it, stage) || !bson_iter_next(&it)) return std::nullopt;
    const std::string_view name = bson_iter_key(&it);
    if (name == "$lookup") return Lookup(it);
    if (name == "$unionWith") return UnionWith(it);
    if (name == "$facet") return Facet(it);
    if (name == "$graphLookup") {
      bson_t spec;
      if (Recurse(it, &spec)) {
        if (auto from = Find(&spec, "from"))
          Reference(NamespaceValue(*from, db_, "coll"), StageAccess::kRecursiveRead, name);
      }
      return std::nullopt;
    }
    if (name == "$out") {
      Reference(NamespaceValue(it, db_, "coll"), StageAccess::kWrite, name);
      return std::nullopt;
    }
    if (name == "$merge") {
      bson_t spec;
      if (BSON_ITER_HOLDS_UTF8(&it)) {
        Reference(NamespaceValue(it, db_, "coll"), StageAccess::kWrite, name);
      } else if (Recurse(it, &spec)) {
        if (auto into = Find(&spec, "into"))
          Reference(NamespaceValue(*into, db_, "coll"), StageAccess::kWrite, name);
      }
      return std::nullopt;
    }
    return std::nullopt;
  }

  void Reference(std::optional<Namespace> ns, StageAccess access, std::string_view stage) {
    if (ns) references_.push_back({std::move(*ns), access, std::string(stage)});
  }

  const ReadView* ViewFor(const std::optional<Namespace>& ns) const {
    return ns && view_of_ ? view_of_(*ns) : nullptr;
  }

  // The client's sub-pipeline under `key` of `spec`, rewritten (nullopt:
  // absent); `changed` says whether anything in it was.
  std::optional<std::vector<Doc>> SubPipeline(const bson_t* spec, std::string_view key,
                                              bool& changed) {
    std::optional<bson_iter_t> it = Find(spec, key);
    bson_t pipeline;
    if (!it || !BSON_ITER_HOLDS_ARRAY(&*it) || !Recurse(*it, &pipeline)) return std::nullopt;
    std::optional<Doc> rewritten = Pipeline(&pipeline);
    changed = changed || rewritten.has_value();
    return StagesOf(rewritten ? rewritten->get() : &pipeline);
  }

  std::optional<Doc> Lookup(const bson_iter_t& stage) {
    bson_t spec;
    if (!BSON_ITER_HOLDS_DOCUMENT(&stage) || !Recurse(stage, &spec)) return std::nullopt;
    std::optional<Namespace> from;
    if (auto it = Find(&spec, "from")) from = NamespaceValue(*it, db_, "coll");
    Reference(from, StageAccess::kRead, "$lookup");
    bool changed = false;
    std::optional<std::vector<Doc>> pipeline = SubPipeline(&spec, "pipeline", changed);
    const ReadView* view = ViewFor(from);
    std::optional<std::string> local = FindString(&spec, "localField");
    std::optional<std::string> foreign = FindString(&spec, "foreignField");
    // Only one of the two: the backend refuses the stage as it is.
    if (view && local.has_value() != foreign.has_value()) view = nullptr;
    if (!view && !changed) return std::nullopt;

    std::vector<Doc> stages;
    if (view) {
      const bool before_view = foreign && view->passes_through &&
                               view->passes_through(foreign->substr(0, foreign->find('.')));
      if (before_view) stages.push_back(EqualityMatch(*foreign));
      stages.insert(stages.end(), view->stages.begin(), view->stages.end());
      if (foreign && !before_view) stages.push_back(EqualityMatch(*foreign));
    }
    if (pipeline) stages.insert(stages.end(), pipeline->begin(), pipeline->end());

    Doc out;
    bool wrote_let = false, wrote_pipeline = false;
    bson_iter_t it;
    bson_iter_init(&it, &spec);
    while (bson_iter_next(&it)) {
      const std::string_view key = bson_iter_key(&it);
      if (view && key == "from") {
        if (BSON_ITER_HOLDS_DOCUMENT(&it)) {  // {db, coll}: the view's source keeps its database
          Doc ns;
          AppendString(ns.mut(), "db", view->source.db);
          AppendString(ns.mut(), "coll", view->source.collection);
          AppendDoc(out.mut(), key, ns);
        } else {
          AppendString(out.mut(), key, view->source.collection);
        }
      } else if (view && (key == "localField" || key == "foreignField")) {
        continue;
      } else if (view && key == "let" && local) {
        Doc let;
        bson_t client_let;
        if (Recurse(it, &client_let))
          bson_copy_to_excluding_noinit(&client_let, let.mut(), kLocalVariable, nullptr);
        AppendDoc(let.mut(), kLocalVariable, LocalValue(*local));
        AppendDoc(out.mut(), key, let);
        wrote_let = true;
      } else if (key == "pipeline") {
        AppendArray(out.mut(), key, stages);
        wrote_pipeline = true;
      } else {
        AppendValue(out.mut(), key, it);
      }
    }
    if (view && local && !wrote_let) {
      Doc let;
      AppendDoc(let.mut(), kLocalVariable, LocalValue(*local));
      AppendDoc(out.mut(), "let", let);
    }
    if (!wrote_pipeline) AppendArray(out.mut(), "pipeline", stages);
    Doc result;
    AppendDoc(result.mut(), "$lookup", out);
    return result;
  }

  std::optional<Doc> UnionWith(const bson_iter_t& stage) {
    std::optional<Namespace> from;
    std::optional<std::vector<Doc>> pipeline;
    bool changed = false;
    bson_t spec;
    if (BSON_ITER_HOLDS_UTF8(&stage)) {
      from = NamespaceValue(stage, db_, "coll");
    } else if (BSON_ITER_HOLDS_DOCUMENT(&stage) && Recurse(stage, &spec)) {
      if (auto it = Find(&spec, "coll")) from = NamespaceValue(*it, db_, "coll");
      pipeline = SubPipeline(&spec, "pipeline", changed);
    } else {
      return std::nullopt;
    }
    Reference(from, StageAccess::kRead, "$unionWith");
    const ReadView* view = ViewFor(from);
    if (!view && !changed) return std::nullopt;

    std::vector<Doc> stages;
    if (view) stages = view->stages;
    if (pipeline) stages.insert(stages.end(), pipeline->begin(), pipeline->end());
    Doc out;
    if (BSON_ITER_HOLDS_UTF8(&stage)) {
      AppendString(out.mut(), "coll", view->source.collection);
      AppendArray(out.mut(), "pipeline", stages);
    } else {
      bool wrote_pipeline = false;
      bson_iter_t it;
      bson_iter_init(&it, &spec);
      while (bson_iter_next(&it)) {
        const std::string_view key = bson_iter_key(&it);
        if (view && key == "coll") {
          AppendString(out.mut(), key, view->source.collection);
        } else if (key == "pipeline") {
          AppendArray(out.mut(), key, stages);
          wrote_pipeline = true;
        } else {
          AppendValue(out.mut(), key, it);
        }
      }
      if (!wrote_pipeline) AppendArray(out.mut(), "pipeline", stages);
    }
    Doc result;
    AppendDoc(result.mut(), "$unionWith", out);
    return result;
  }

  std::optional<Doc> Facet(const bson_iter_t& stage) {
    bson_t spec;
    if (!BSON_ITER_HOLDS_DOCUMENT(&stage) || !Recurse(stage, &spec)) return std::nullopt;
    bool changed = false;
    Doc out;
    bson_iter_t it;
    bson_iter_init(&it, &spec);
    while (bson_iter_next(&it)) {
      bson_t pipeline;
      std::optional<Doc> rewritten;
      if (BSON_ITER_HOLDS_ARRAY(&it) && Recurse(it, &pipeline)) rewritten = Pipeline(&pipeline);
      if (rewritten) {
        bson_append_array(out.mut(), bson_iter_key(&it), -1, rewritten->get());
        changed = true;
      } else {
        AppendValue(out.mut(), bson_iter_key(&it), it);
      }
    }
    if (!changed) return std::nullopt;
    Doc result;
    AppendDoc(result.mut(), "$facet", out);
    return result;
  }

  std::string_view db_;
  const ViewLookup& view_of_;
  std::vector<StageReference>& references_;
};

}  // namespace

PipelineWalk WalkPipeline(const bson_t* pipeline, std::string_view db, const ViewLookup& view_of) {
  PipelineWalk walk;
  Walker walker(db, view_of, walk.references);
  walk.rewritten = walker.Pipeline(pipeline);
  return walk;
}

}  // namespace remold
