// What every rewrite of a client's aggregate through a view uses (pure):
// what the pipeline's first stage is about, and the client's command with
// remold's pipeline in place of its own.
#pragma once

#include <string_view>
#include <vector>

#include "common/doc.h"
#include "rewrite/plan.h"

namespace remold {

// A first stage about the collection or its change events, not its
// documents ($collStats, $indexStats, $changeStream, $planCacheStats):
// the stored collection answers it.
bool IsAboutTheCollection(std::string_view stage);

// A first stage that must stay first ($geoNear, $search, $searchMeta):
// the documents it produces go through the view after it.
bool MustStayFirst(std::string_view stage);

// `body` (a client's aggregate) with `pipeline` in place of its own, every
// other field as it was, in order.
BackendCommand WithPipeline(const bson_t* body, const std::vector<Doc>& pipeline);

}  // namespace remold
