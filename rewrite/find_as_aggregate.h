// A find command answered by an aggregate over a pattern's view: what a
// pattern sends when the find's filter, sort or projection must see the
// documents as the view makes them (pure).
//
//   [<before_view>..., <view>..., {$match: <after_view>}, {$sort}, {$skip},
//    {$limit}, {$project}]
//
// with the find's batchSize, collation, allowDiskUse, let and hint, and its
// generic arguments. A find that asks for one batch (singleBatch, or a
// negative limit) gets cursor id 0, and the rest of the aggregate's cursor
// is killed (SingleBatchShape).
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <variant>
#include <vector>

#include "rewrite/command.h"
#include "rewrite/plan.h"

namespace remold {

struct FindPipeline {
  std::vector<Doc> before_view;      // on the stored documents
  std::vector<Doc> view;
  std::optional<Doc> after_view;     // the filter on the documents the view makes
  // Set: the stages that stand for the find's projection (one the pattern
  // translated, find-only operators included), in place of its $project.
  std::optional<std::vector<Doc>> projection_stages;
};

struct AggregateFind {
  BackendCommand command;
  bool single_batch = false;
};

// The aggregate, or why the find cannot run as one: a find-only option
// (tailable, min, max, returnKey...) set, named in the refusal's message
// after `why_aggregate` ("with a sort on attributes").
std::variant<AggregateFind, Refusal> FindAsAggregate(const Command& find, const Namespace& ns,
                                                    FindPipeline pipeline, const std::string& why_aggregate);

// The client's reply when it asked for one batch: cursor id 0, and the
// aggregate's cursor (in `ns`) killed after the reply.
std::function<ShapedReply(std::span<const Doc>)> SingleBatchShape(const Namespace& ns);

}  // namespace remold
