// Large messages through remold: a ~15 MB document must come back
// byte-identical, and three of them travel in one ~46 MB insert message
// (under the 48,000,000-byte message limit) and come back in their own
// getMore batches.

#include <cstring>
#include <random>

#include "driver.h"

namespace e2e {
namespace {

constexpr size_t kBlobBytes = 14 * 1024 * 1024;
constexpr size_t kTextBytes = 512 * 1024;
constexpr int kItems = 5000;
constexpr size_t kMaxMessageBytes = 48'000'000;

// A ~15 MB document mixing binary, multi-byte UTF-8, and many small typed
// values, deterministic per seed.
Bson LargeDocument(int id) {
  std::mt19937_64 random(static_cast<uint64_t>(id));
  std::string blob(kBlobBytes, '\0');
  for (char& byte : blob) byte = static_cast<char>(random());
  std::string text;
  while (text.size() < kTextBytes) text += "héllo wörld ✓ 数据 ";

  Bson doc;
  doc.Add("_id", id);
  bson_append_binary(doc.get(), "blob", -1, BSON_SUBTYPE_BINARY, reinterpret_cast<const uint8_t*>(blob.data()),
                     static_cast<uint32_t>(blob.size()));
  doc.Add("text", text);
  std::vector<Bson> items;
  for (int i = 0; i < kItems; ++i) {
    Bson item;
    item.Add("i", i).Add("l", static_cast<int64_t>(random())).Add("d", i / 7.0).Add("b", i % 2 == 0);
    bson_append_null(item.get(), "n", -1);
    bson_append_date_time(item.get(), "t", -1, 1'700'000'000'000 + i);
    items.push_back(std::move(item));
  }
  doc.AddArray("items", items);
  return doc;
}

bool SameBytes(const bson_t* a, const bson_t* b) {
  return a->len == b->len && std::memcmp(bson_get_data(a), bson_get_data(b), a->len) == 0;
}

std::vector<Bson> FindById(mongoc_collection_t* coll, const char* filter) {
  CursorPtr cursor(mongoc_collection_find_with_opts(coll, Json(filter).get(), Json(R"({"sort": {"_id": 1}})").get(), nullptr));
  return Drain(cursor.get());
}

using LargeDocumentTest = DriverTest;

TEST_F(LargeDocumentTest, FifteenMegabyteDocumentRoundTripsByteIdentical) {
  CollectionPtr coll = Collection();
  Bson doc = LargeDocument(1);
  ASSERT_GT(doc.get()->len, 15'000'000u);
  ASSERT_LT(doc.get()->len, 16u * 1024 * 1024);

  Bson reply;
  bson_error_t error;
  ASSERT_TRUE(mongoc_collection_insert_one(coll.get(), doc.get(), nullptr, reply.out(), &error)) << error.message;
  EXPECT_EQ(reply.Int("insertedCount"), 1);

  std::vector<Bson> found = FindById(coll.get(), R"({"_id": 1})");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].get()->len, doc.get()->len);
  EXPECT_TRUE(SameBytes(found[0].get(), doc.get())) << "the document came back with different bytes";
}

TEST_F(LargeDocumentTest, ThreeLargeDocumentsInOneMessage) {
  CollectionPtr coll = Collection();
  std::vector<Bson> docs;
  size_t total = 0;
  for (int id = 10; id < 13; ++id) {
    docs.push_back(LargeDocument(id));
    total += docs.back().get()->len;
  }
  ASSERT_LT(total + 16 * 1024, kMaxMessageBytes) << "test data must fit one message";
  log_.Clear();
  InsertAll(coll.get(), docs);
  EXPECT_EQ(log_.Count("insert", Phase::kSucceeded), 1u) << "the driver split the batch";

  std::vector<Bson> found = FindById(coll.get(), "{}");
  ASSERT_EQ(found.size(), docs.size());
  for (size_t i = 0; i < docs.size(); ++i) {
    EXPECT_TRUE(SameBytes(found[i].get(), docs[i].get())) << "document " << i << " differs";
  }
}

}  // namespace
}  // namespace e2e
