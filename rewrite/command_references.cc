#include "rewrite/command_references.h"

#include <utility>

#include "rewrite/command_namespace.h"

namespace remold {
namespace {

// "db.collection" (the collection may hold dots); nullopt without a dot.
std::optional<Namespace> SplitFullName(std::string_view full) {
  const size_t dot = full.find('.');
  if (dot == std::string_view::npos || dot == 0) return std::nullopt;
  return Namespace{std::string(full.substr(0, dot)), std::string(full.substr(dot + 1))};
}

bool ReadDocument(const bson_iter_t& it, bson_t* out) {
  uint32_t length = 0;
  const uint8_t* data = nullptr;
  if (BSON_ITER_HOLDS_DOCUMENT(&it)) bson_iter_document(&it, &length, &data);
  else if (BSON_ITER_HOLDS_ARRAY(&it)) bson_iter_array(&it, &length, &data);
  else return false;
  return bson_init_static(out, data, length);
}

// The name of the first stage of the pipeline under `it`, and its spec.
std::optional<std::pair<std::string, bson_iter_t>> FirstStage(const bson_iter_t& it) {
  bson_t pipeline, stage;
  bson_iter_t stages, first;
  if (!BSON_ITER_HOLDS_ARRAY(&it) || !ReadDocument(it, &pipeline) ||
      !bson_iter_init(&stages, &pipeline) || !bson_iter_next(&stages) ||
      !ReadDocument(stages, &stage) || !bson_iter_init(&first, &stage) || !bson_iter_next(&first))
    return std::nullopt;
  return std::make_pair(std::string(bson_iter_key(&first)), first);
}

class Collector {
 public:
  Collector(const Command& command, const ViewLookup& view_of)
      : command_(command), view_of_(view_of) {}

  CommandReferences Collect() {
    const bson_t* body = command_.body.get();
    std::optional<CommandNamespace> target = ResolveNamespace(command_.name, body);
    if (target && target->collection && target->known)
      Add({command_.db, *target->collection}, ReferenceKind::kTarget, command_.name);
    const std::string& name = command_.name;
    if (name == "aggregate") Aggregate(target && target->known ? target->collection : std::nullopt);
    else if (name == "create") Create();
    else if (name == "renameCollection") Rename();
    else if (name == "mapReduce") MapReduce();
    else if (name == "bulkWrite") BulkWrite();
    else if (name == "dropDatabase") Add({command_.db, ""}, ReferenceKind::kDropDatabase, name);
    return std::move(out_);
  }

 private:
  void Add(Namespace ns, ReferenceKind kind, std::string_view via) {
    out_.references.push_back({std::move(ns), kind, std::string(via)});
  }

  // Walks the pipeline under "pipeline"; its rewritten form, if any.
  std::optional<Doc> Pipeline() {
    std::optional<bson_iter_t> it = Find(command_.body.get(), "pipeline");
    bson_t pipeline;
    if (!it || !BSON_ITER_HOLDS_ARRAY(&*it) || !ReadDocument(*it, &pipeline)) return std::nullopt;
    PipelineWalk walk = WalkPipeline(&pipeline, command_.db, view_of_);
    for (StageReference& reference : walk.references) {
      ReferenceKind kind = reference.access == StageAccess::kRead ? ReferenceKind::kRead
                           : reference.access == StageAccess::kRecursiveRead
                               ? ReferenceKind::kRecursiveRead
                               : ReferenceKind::kWrite;
      Add(std::move(reference.ns), kind, reference.stage);
    }
    return std::move(walk.rewritten);
  }

  void Aggregate(const std::optional<std::string>& collection) {
    if (auto pipeline = Find(command_.body.get(), "pipeline")) {
      if (auto first = FirstStage(*pipeline)) {
        const std::string& stage = first->first;
        if (stage == "$changeStream") {
          bson_t spec;
          bool cluster = false;
          if (ReadDocument(first->second, &spec))
            cluster = FindBool(&spec, "allChangesForCluster").value_or(false);
          if (collection) Add({command_.db, *collection}, ReferenceKind::kChangeStream, stage);
          else if (cluster) Add({"", ""}, ReferenceKind::kChangeStream, stage);
          else Add({command_.db, ""}, ReferenceKind::kChangeStream, stage);
        } else if ((stage == "$collStats" || stage == "$indexStats") && collection) {
          Add({command_.db, *collection}, ReferenceKind::kMetadata, stage);
        }
      }
    }
    if (std::optional<Doc> pipeline = Pipeline()) Replace({{"pipeline", std::move(*pipeline)}});
  }

  // {create: name, viewOn: source, pipeline: [...]}.
  void Create() {
    std::optional<std::string> view_on = FindString(command_.body.get(), "viewOn");
    std::optional<Doc> pipeline = Pipeline();
    const ReadView* view = nullptr;
    if (view_on) {
      Namespace source{command_.db, *view_on};
      Add(source, ReferenceKind::kViewOn, "create");
      if (view_of_) view = view_of_(source);
    }
    if (!view && !pipeline) return;
    std::vector<std::pair<std::string, Doc>> replacements;
    if (view) {
      std::vector<Doc> stages = view->stages;
      std::optional<Doc> client = pipeline;
      if (!client) client = FindDocument(command_.body.get(), "pipeline");
      if (client) {
        bson_iter_t it;
        bson_iter_init(&it, client->get());
        while (bson_iter_next(&it)) {
          bson_t stage;
          if (ReadDocument(it, &stage)) stages.push_back(Doc::FromBson(&stage));
        }
      }
      Doc array;
      for (size_t i = 0; i < stages.size(); ++i)
        bson_append_document(array.mut(), std::to_string(i).c_str(), -1, stages[i].get());
      Doc source;
      AppendString(source.mut(), "viewOn", view->source.collection);
      replacements.emplace_back("viewOn", std::move(source));
      replacements.emplace_back("pipeline", std::move(array));
    } else {
      replacements.emplace_back("pipeline", std::move(*pipeline));
    }
    Replace(std::move(replacements));
  }

  void Rename() {
    const bson_t* body = command_.body.get();
    for (const char* key : {"renameCollection", "to"}) {
      std::optional<std::string> full = FindString(body, key);
      if (!full) continue;
      if (std::optional<Namespace> ns = SplitFullName(*full))
        Add(std::move(*ns), ReferenceKind::kRename, "renameCollection");
    }
  }

  // out: "name" | {replace|merge|reduce: "name", db: "d"} | {inline: 1}.
  void MapReduce() {
    std::optional<bson_iter_t> out = Find(command_.body.get(), "out");
    if (!out) return;
    if (BSON_ITER_HOLDS_UTF8(&*out)) {
      Add({command_.db, bson_iter_utf8(&*out, nullptr)}, ReferenceKind::kWrite, "mapReduce");
      return;
    }
    bson_t spec;
    if (!ReadDocument(*out, &spec)) return;
    std::optional<std::string> db = FindString(&spec, "db");
    for (const char* action : {"replace", "merge", "reduce"})
      if (std::optional<std::string> collection = FindString(&spec, action))
        Add({db ? *db : command_.db, *collection}, ReferenceKind::kWrite, "mapReduce");
  }

  // MongoDB 8.0: {bulkWrite: 1, ops: [...], nsInfo: [{ns: "db.c"}, ...]}.
  void BulkWrite() {
    std::optional<bson_iter_t> info = Find(command_.body.get(), "nsInfo");
    if (!info) return;
    ForEachChild(*info, [&](std::string_view, const bson_iter_t& entry) {
      bson_t spec;
      if (!ReadDocument(entry, &spec)) return;
      if (std::optional<std::string> full = FindString(&spec, "ns"))
        if (std::optional<Namespace> ns = SplitFullName(*full))
          Add(std::move(*ns), ReferenceKind::kBulkWrite, "bulkWrite");
    });
  }

  // The command with each named field's value replaced (in place, keeping
  // the order of the client's fields). A replacement Doc holds the value
  // itself: an array for "pipeline", {viewOn: "name"} for "viewOn".
  void Replace(std::vector<std::pair<std::string, Doc>> replacements) {
    Doc body;
    std::vector<bool> written(replacements.size(), false);
    auto append = [&](size_t i) {
      const auto& [key, value] = replacements[i];
      if (key == "pipeline") bson_append_array(body.mut(), key.c_str(), -1, value.get());
      else if (auto inner = Find(value.get(), key)) AppendValue(body.mut(), key, *inner);
      written[i] = true;
    };
    bson_iter_t it;
    bson_iter_init(&it, command_.body.get());
    while (bson_iter_next(&it)) {
      const std::string_view key = bson_iter_key(&it);
      size_t i = 0;
      while (i < replacements.size() && replacements[i].first != key) ++i;
      if (i == replacements.size()) AppendValue(body.mut(), key, it);
      else append(i);
    }
    for (size_t i = 0; i < replacements.size(); ++i)
      if (!written[i]) append(i);
    Command rewritten{command_.db, command_.name, std::move(body)};
    out_.rewritten = std::move(rewritten);
  }

  const Command& command_;
  const ViewLookup& view_of_;
  CommandReferences out_;
};

}  // namespace

CommandReferences ReferencesOf(const Command& command, const ViewLookup& view_of) {
  return Collector(command, view_of).Collect();
}

}  // namespace remold
