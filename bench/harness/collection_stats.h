// collection_stats: a collection's storage as the backend reports it
// (collStats, the database's dbStats, listIndexes), asked directly.
//
// Contract:
//   - collection_stats() never fails: a command the backend refuses leaves
//     its numbers at -1 (its JSON is then the error reply).
//   - index_size is mongod's totalIndexSize (bytes), else the sum of its
//     indexSizes, else the sum of mongo-java-server's per-index indexSize
//     document (not bytes there: entry counts, 0 for compound indexes).
#pragma once

#include "bench_mongoc.h"

#include <string>
#include <vector>

namespace bench_common {

struct CollectionStats {
  std::string ns;
  std::string coll_stats_json;
  std::string db_stats_json;
  std::vector<std::string> indexes;  // listIndexes entries, as JSON
  double documents = -1;
  double data_size = -1;
  double storage_size = -1;
  double nindexes = -1;
  double index_size = -1;
  double db_data_size = -1;
  double db_index_size = -1;
};

CollectionStats collection_stats(mongoc_client_t* client, const char* db, const char* collection);

}  // namespace bench_common
