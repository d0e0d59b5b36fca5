// explain executionStats of a find: see explain_stats.h.
#include "explain_stats.h"

namespace bench_common {
namespace {

// Walks the winning plan: "FETCH<IXSCAN" (outermost first).
std::string plan_stages(const bson_t* explain) {
  bson_iter_t it, plan;
  if (!bson_iter_init(&it, explain) ||
      !bson_iter_find_descendant(&it, "queryPlanner.winningPlan", &plan) ||
      !BSON_ITER_HOLDS_DOCUMENT(&plan))
    return "?";
  std::string out;
  for (int depth = 0; depth < 16; ++depth) {
    uint32_t len;
    const uint8_t* data;
    bson_iter_document(&plan, &len, &data);
    bson_t node;
    if (!bson_init_static(&node, data, len)) break;
    bson_iter_t child;
    // mongod 7+ with the slot-based engine nests the plan under queryPlan.
    if (bson_iter_init_find(&child, &node, "queryPlan") && BSON_ITER_HOLDS_DOCUMENT(&child)) {
      plan = child;
      continue;
    }
    if (bson_iter_init_find(&child, &node, "stage") && BSON_ITER_HOLDS_UTF8(&child)) {
      if (!out.empty()) out += "<";
      out += bson_iter_utf8(&child, nullptr);
    }
    if (bson_iter_init_find(&child, &node, "inputStage") && BSON_ITER_HOLDS_DOCUMENT(&child)) {
      plan = child;
      continue;
    }
    bson_iter_t stages, first;
    if (bson_iter_init_find(&stages, &node, "inputStages") && BSON_ITER_HOLDS_ARRAY(&stages) &&
        bson_iter_recurse(&stages, &first) && bson_iter_next(&first) &&
        BSON_ITER_HOLDS_DOCUMENT(&first)) {
      plan = first;
      continue;
    }
    break;
  }
  return out.empty() ? "?" : out;
}

}  // namespace

ExplainStats explain_find(mongoc_client_t* client, const char* db, const char* collection,
                          const bson_t* filter) {
  ExplainStats out;
  bson_t cmd, inner;
  bson_init(&cmd);
  BSON_APPEND_DOCUMENT_BEGIN(&cmd, "explain", &inner);
  BSON_APPEND_UTF8(&inner, "find", collection);
  BSON_APPEND_DOCUMENT(&inner, "filter", filter);
  bson_append_document_end(&cmd, &inner);
  BSON_APPEND_UTF8(&cmd, "verbosity", "executionStats");
  CommandResult r = run_command(client, db, &cmd);
  bson_destroy(&cmd);
  if (!r.ok) {
    const std::string message = r.error.message;
    // CommandNotFound (59): the backend has no explain at all
    // (mongo-java-server). Anything else is a real failure, shown as is.
    if (r.error.code == 59 || message.find("no such command") != std::string::npos) {
      out.kind = ExplainStats::kUnsupported;
    } else {
      out.kind = ExplainStats::kFailed;
      out.error = message;
    }
    return out;
  }
  out.kind = ExplainStats::kStats;
  out.docs_examined = number_at(r.reply.get(), "executionStats.totalDocsExamined").value_or(-1);
  out.keys_examined = number_at(r.reply.get(), "executionStats.totalKeysExamined").value_or(-1);
  out.returned = number_at(r.reply.get(), "executionStats.nReturned").value_or(-1);
  out.plan = plan_stages(r.reply.get());
  if (out.docs_examined < 0) {
    out.kind = ExplainStats::kFailed;
    out.error = "no executionStats.totalDocsExamined in " + to_json(r.reply.get()).substr(0, 300);
  }
  return out;
}

}  // namespace bench_common
