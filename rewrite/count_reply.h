// A count answered by an aggregate (pure): the stages that end it, from
// the count's skip and limit, and the client's {n, ok} from its reply.
#pragma once

#include <span>
#include <vector>

#include "common/doc.h"
#include "rewrite/plan.h"

namespace remold {

// [{$skip}, {$limit}, {$count: "n"}]: the skip and limit of `count` (a
// count command's body) where it has them.
std::vector<Doc> CountStages(const bson_t* count);

// {n, $clusterTime, operationTime, ok: 1} from the aggregate's reply (n an
// int32 while it fits); an error reply as it is.
ShapedReply CountReply(std::span<const Doc> replies);

}  // namespace remold
