// The namespaces an aggregation pipeline names, at any depth, and the
// rewrite that reads a namespace through a view instead of as stored.
//
// A stage names a namespace to read from ($lookup, $unionWith), to read from
// recursively ($graphLookup), or to write to ($out, $merge); $facet and the
// sub-pipelines of $lookup and $unionWith are walked as well. The walk is
// pure: it looks at the pipeline alone, and `view_of` decides which reads
// go through a view.
//
// A read through a view becomes the pipeline form of its stage, over the
// view's source: {$lookup: {from: X, localField: l, foreignField: f, as}}
// becomes {$lookup: {from: <source>, let: {remold_local: "$l"},
// pipeline: [<view>..., {$match: <f matches $$remold_local as $lookup's
// equality does>}], as}} (the $match first when the view keeps that field
// as stored); {$unionWith: X} becomes {$unionWith: {coll:
// <source>, pipeline: [<view>...]}}. The client's own sub-pipeline follows
// the view. Only MongoDB 4.2 operators are used ($unionWith itself is 4.4).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <bson/bson.h>

#include "common/doc.h"
#include "rules/namespace.h"

namespace remold {

enum class StageAccess {
  kRead,           // $lookup, $unionWith
  kRecursiveRead,  // $graphLookup
  kWrite,          // $out, $merge
};

struct StageReference {
  Namespace ns;
  StageAccess access;
  std::string stage;  // "$lookup", ...
};

// How a namespace is read when a stage reads it through a view.
struct ReadView {
  Namespace source;        // the collection the view reads
  std::vector<Doc> stages;  // the view itself
  // Whether the view keeps a stored top-level field unchanged: a $lookup's
  // equality on it is matched before the view, on the stored documents.
  std::function<bool(std::string_view field)> passes_through;
};

// Returns the view to read `ns` through, or nullptr to read it as stored.
using ViewLookup = std::function<const ReadView*(const Namespace& ns)>;

struct PipelineWalk {
  std::vector<StageReference> references;  // in the order the stages appear
  // The pipeline (as an array document) with each read through a view
  // rewritten; nullopt when nothing was.
  std::optional<Doc> rewritten;
};

// Walks `pipeline` (an array of stage documents) of a command on database
// `db`. With `view_of` empty, only lists the references.
PipelineWalk WalkPipeline(const bson_t* pipeline, std::string_view db,
                          const ViewLookup& view_of = {});

}  // namespace remold
