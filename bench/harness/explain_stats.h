// explain_stats: what a find costs the backend, by explain with
// executionStats: documents and keys examined, and the winning plan.
//
// Contract:
//   - explain_find() sends {explain: {find, filter}, verbosity:
//     "executionStats"} to `db` on `client`; through remold, remold explains
//     the command it rewrites the find into.
//   - kind is kStats with the numbers (and `plan`, the winning plan's stages
//     outermost first, e.g. "FETCH<IXSCAN"); kUnsupported when the backend
//     has no explain at all (CommandNotFound: mongo-java-server); kFailed
//     with `error` for any other failure or a reply without
//     executionStats.totalDocsExamined.
#pragma once

#include "bench_mongoc.h"

#include <string>

namespace bench_common {

struct ExplainStats {
  enum Kind { kNone, kStats, kUnsupported, kFailed } kind = kNone;
  double docs_examined = -1;
  double keys_examined = -1;
  double returned = -1;
  std::string plan;
  std::string error;
};

ExplainStats explain_find(mongoc_client_t* client, const char* db, const char* collection,
                          const bson_t* filter);

}  // namespace bench_common
