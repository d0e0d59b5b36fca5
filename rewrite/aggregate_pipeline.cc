#include "rewrite/aggregate_pipeline.h"

namespace remold {

bool IsAboutTheCollection(std::string_view stage) {
  return stage == "$collStats" || stage == "$indexStats" || stage == "$changeStream" || stage == "$planCacheStats";
}

bool MustStayFirst(std::string_view stage) { return stage == "$geoNear" || stage == "$search" || stage == "$searchMeta"; }

BackendCommand WithPipeline(const bson_t* body, const std::vector<Doc>& pipeline) {
  BackendCommand backend;
  bson_iter_t it;
  bson_iter_init(&it, body);
  while (bson_iter_next(&it)) {
    if (std::string_view(bson_iter_key(&it)) == "pipeline") AppendArray(backend.body.mut(), "pipeline", pipeline);
    else AppendValue(backend.body.mut(), bson_iter_key(&it), it);
  }
  return backend;
}

}  // namespace remold
