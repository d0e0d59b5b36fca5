// A collection's storage as the backend reports it: see collection_stats.h.
#include "collection_stats.h"

#include <optional>

namespace bench_common {
namespace {

// Sum of the numeric values of a sub-document (per-index sizes).
std::optional<double> sum_of_subdocument(const bson_t* doc, const char* key) {
  bson_iter_t it, child;
  if (!bson_iter_init_find(&it, doc, key) || !BSON_ITER_HOLDS_DOCUMENT(&it) ||
      !bson_iter_recurse(&it, &child))
    return std::nullopt;
  double total = 0;
  while (bson_iter_next(&child))
    if (BSON_ITER_HOLDS_NUMBER(&child)) total += bson_iter_as_double(&child);
  return total;
}

std::vector<std::string> first_batch_as_json(const bson_t* reply) {
  std::vector<std::string> docs;
  bson_iter_t it, batch, entry;
  if (!bson_iter_init(&it, reply) || !bson_iter_find_descendant(&it, "cursor.firstBatch", &batch) ||
      !BSON_ITER_HOLDS_ARRAY(&batch) || !bson_iter_recurse(&batch, &entry))
    return docs;
  while (bson_iter_next(&entry)) {
    uint32_t len;
    const uint8_t* data;
    bson_iter_document(&entry, &len, &data);
    bson_t doc;
    if (bson_init_static(&doc, data, len)) docs.push_back(to_json(&doc));
  }
  return docs;
}

}  // namespace

CollectionStats collection_stats(mongoc_client_t* client, const char* db, const char* collection) {
  CollectionStats st;
  st.ns = std::string(db) + "." + collection;
  BsonPtr coll_stats_cmd(BCON_NEW("collStats", BCON_UTF8(collection)));
  auto cs = command(client, db, coll_stats_cmd.get(), true);
  st.coll_stats_json = to_json(cs.get());
  auto ds = command(client, db, json(R"({"dbStats": 1})").get(), true);
  st.db_stats_json = to_json(ds.get());
  st.documents = number_at(cs.get(), "count").value_or(-1);
  st.data_size = number_at(cs.get(), "size").value_or(-1);
  st.storage_size = number_at(cs.get(), "storageSize").value_or(-1);
  st.nindexes = number_at(cs.get(), "nindexes").value_or(-1);
  if (auto total = number_at(cs.get(), "totalIndexSize")) st.index_size = *total;
  else if (auto sizes = sum_of_subdocument(cs.get(), "indexSizes")) st.index_size = *sizes;
  else if (auto per_index = sum_of_subdocument(cs.get(), "indexSize")) st.index_size = *per_index;
  else st.index_size = number_at(cs.get(), "indexSize").value_or(-1);
  st.db_data_size = number_at(ds.get(), "dataSize").value_or(-1);
  st.db_index_size = number_at(ds.get(), "indexSize").value_or(-1);
  BsonPtr list_indexes_cmd(BCON_NEW("listIndexes", BCON_UTF8(collection)));
  st.indexes = first_batch_as_json(command(client, db, list_indexes_cmd.get(), true).get());
  return st;
}

}  // namespace bench_common
