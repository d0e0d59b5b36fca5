#include "patterns/bucket/migration.h"

#include <cstring>
#include <span>
#include <string>

#include "common/derived_id.h"
#include "patterns/bucket/rewrite.h"

namespace remold {
namespace {

std::string Seed(std::string_view prefix, size_t position) {
  std::string seed(prefix);
  seed.push_back('\0');
  seed += std::to_string(position);
  return seed;
}

MovedBatch IntoBuckets(const BucketRule& rule, const std::vector<Doc>& batch, std::string_view token) {
  MovedBatch moved;
  std::vector<std::span<const uint8_t>> views;
  views.reserve(batch.size());
  for (const Doc& doc : batch) views.push_back(doc.bytes());
  BucketUpserts upserts = PlanBucketUpserts(rule, "reading", views, /*ordered=*/false, Capabilities{});
  if (upserts.too_large) {
    for (size_t i = 0; i < batch.size(); ++i) moved.failed.emplace_back(i, *upserts.too_large);
    return moved;
  }
  for (const RejectedReading& rejected : upserts.rejected) moved.failed.emplace_back(rejected.index, rejected.message);
  for (size_t k = 0; k < upserts.statements.size(); ++k) {
    // {_id: <derived>, count: {$exists: false}}: matches no bucket (every
    // bucket has a count), so the upsert inserts, or meets its own bucket
    // of an earlier run as a duplicate _id.
    Doc q, absent, statement;
    AppendDerivedId(q.mut(), "_id", Seed(token, k));
    BSON_APPEND_BOOL(absent.mut(), "$exists", false);
    AppendDoc(q.mut(), BucketRule::kCountField, absent);
    AppendDoc(statement.mut(), "q", q);
    AppendDoc(statement.mut(), "u", *FindDocument(upserts.statements[k].get(), "u"));
    BSON_APPEND_BOOL(statement.mut(), "upsert", true);
    moved.upserts.push_back(std::move(statement));
    moved.sources.push_back(std::move(upserts.readings[k]));
  }
  return moved;
}

MovedBatch OutOfBuckets(const BucketRule& rule, const std::vector<Doc>& batch) {
  MovedBatch moved;
  for (size_t b = 0; b < batch.size(); ++b) {
    const bson_t* bucket = batch[b].get();
    std::optional<bson_iter_t> readings = Find(bucket, rule.measurements_field);
    std::optional<bson_iter_t> bucket_id = Find(bucket, "_id");
    if (!readings || !BSON_ITER_HOLDS_ARRAY(&*readings) || !bucket_id) {
      moved.failed.emplace_back(b, "not a bucket: no '" + rule.measurements_field + "' array of readings");
      continue;
    }
    Doc id_box;
    AppendValue(id_box.mut(), "_id", *bucket_id);
    const auto id_bytes = id_box.bytes();
    const std::string_view id_seed(reinterpret_cast<const char*>(id_bytes.data()), id_bytes.size());
    std::vector<Doc> flats;
    bool bad = false;
    size_t position = 0;
    for (const Doc& measurement : ArrayDocuments(*readings)) {
      Doc flat;
      if (auto id = Find(measurement.get(), "_id")) AppendValue(flat.mut(), "_id", *id);
      else AppendDerivedId(flat.mut(), "_id", Seed(id_seed, position));
      for (const std::string& field : rule.meta_fields)
        if (auto value = Find(bucket, field)) AppendValue(flat.mut(), field, *value);
      bson_iter_t it;
      bson_iter_init(&it, measurement.get());
      while (bson_iter_next(&it))
        if (std::string_view(bson_iter_key(&it)) != "_id") AppendValue(flat.mut(), bson_iter_key(&it), it);
      flats.push_back(std::move(flat));
      ++position;
    }
    bson_iter_t count_check, child;
    count_check = *readings;
    if (bson_iter_recurse(&count_check, &child)) {
      size_t elements = 0;
      while (bson_iter_next(&child)) ++elements;
      bad = elements != flats.size();
    }
    if (bad) {
      moved.failed.emplace_back(b, "a reading of the bucket is not a document");
      continue;
    }
    for (Doc& flat : flats) {
      moved.inserts.push_back(std::move(flat));
      moved.sources.push_back({b});
    }
  }
  return moved;
}

}  // namespace

CollectionMove MoveOf(const BucketRule& rule, MigrationDirection direction) {
  if (direction == MigrationDirection::kToFlat) {
    // Back: a bucket may still take readings from a proxy serving the rule.
    return {rule.buckets, rule.logical, "{}", true};
  }
  // Into buckets: by meta values and time, so that a batch fills buckets.
  Doc order;
  for (const std::string& field : rule.meta_fields) BSON_APPEND_INT32(order.mut(), field.c_str(), 1);
  BSON_APPEND_INT32(order.mut(), rule.time_field.c_str(), 1);
  BSON_APPEND_INT32(order.mut(), "_id", 1);
  return {rule.logical, rule.buckets, "{}", false, order.ToCanonicalJson()};
}

MovedBatch MovedDocuments(const BucketRule& rule, MigrationDirection direction, const std::vector<Doc>& batch,
                          std::string_view token) {
  return direction == MigrationDirection::kToRule ? IntoBuckets(rule, batch, token) : OutOfBuckets(rule, batch);
}

}  // namespace remold
