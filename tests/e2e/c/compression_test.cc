// Compressed connections through remold, once per compressor (snappy, zlib,
// zstd): the driver offers exactly one compressor in the URI, the handshake
// must accept it, and real reads and writes (up to a 15 MB incompressible
// document) must return the right data. A WireTap between driver and server
// checks the wire: every request after the handshake is OP_COMPRESSED with
// that compressor, and so is every reply to it (mongod answers a compressed
// request compressed, with the same compressor). remold decodes all three
// itself, so through the proxy the compressor is required; a bare backend
// that offers none is skipped.

#include <cstring>
#include <random>

#include "driver.h"
#include "harness.h"
#include "wire_tap.h"

namespace e2e {
namespace {

constexpr int32_t kOpMsg = 2013;
constexpr int32_t kOpCompressed = 2012;

int CompressorId(const std::string& name) { return name == "snappy" ? 1 : name == "zlib" ? 2 : 3; }

class CompressionTest : public DriverTest, public testing::WithParamInterface<const char*> {
 protected:
  // The pool connects through a WireTap in front of the server under test.
  UriPtr MakeUri() override {
    UriPtr server = ServerUri();
    if (!server) return server;
    const mongoc_host_list_t* host = mongoc_uri_get_hosts(server.get());
    tap_ = std::make_unique<WireTap>(host->host, host->port);
    return TestUri("mongodb://127.0.0.1:" + std::to_string(tap_->port()), GetParam());
  }

  std::unique_ptr<WireTap> tap_;
};

// Total messages of one kind in one direction.
int Total(const std::map<FrameKind, int>& counts, const FrameKind& kind) {
  auto found = counts.find(kind);
  return found == counts.end() ? 0 : found->second;
}

// Messages that are OP_COMPRESSED with any compressor.
int TotalCompressed(const std::map<FrameKind, int>& counts) {
  int total = 0;
  for (const auto& [kind, count] : counts) {
    if (kind.opcode == kOpCompressed) total += count;
  }
  return total;
}

// Compressors the server accepted in its handshake reply.
std::vector<std::string> NegotiatedCompressors(mongoc_client_t* client) {
  std::vector<std::string> names;
  ServerDescriptionPtr server = SelectedServer(client);
  if (!server) return names;
  Bson hello(mongoc_server_description_hello_response(server.get()));
  bson_iter_t iter;
  bson_iter_t child;
  if (bson_iter_init_find(&iter, hello.get(), "compression") && BSON_ITER_HOLDS_ARRAY(&iter) &&
      bson_iter_recurse(&iter, &child)) {
    while (bson_iter_next(&child)) {
      if (BSON_ITER_HOLDS_UTF8(&child)) names.emplace_back(bson_iter_utf8(&child, nullptr));
    }
  }
  return names;
}

// Highly compressible documents, so the compressed frames are much smaller.
std::vector<Bson> TextDocs(int count) {
  std::vector<Bson> docs;
  for (int i = 0; i < count; ++i) {
    std::string text;
    for (int r = 0; r < 40; ++r) text += "remold compresses " + std::to_string(i) + " ";
    docs.push_back(Bson().Add("_id", i).Add("parity", i % 2).Add("text", text));
  }
  return docs;
}

Bson RandomBlobDocument(const char* id, size_t bytes) {
  std::mt19937_64 random(42);
  std::string blob(bytes, '\0');
  for (char& byte : blob) byte = static_cast<char>(random());
  Bson doc = Bson().Add("_id", id);
  bson_append_binary(doc.get(), "blob", -1, BSON_SUBTYPE_BINARY, reinterpret_cast<const uint8_t*>(blob.data()),
                     static_cast<uint32_t>(blob.size()));
  return doc;
}

TEST_P(CompressionTest, NegotiatesCompressorAndServesReadsAndWrites) {
  const std::string compressor = GetParam();
  std::vector<std::string> negotiated = NegotiatedCompressors(client());
  if (negotiated.empty() && !harness::Current().through_proxy) {
    GTEST_SKIP() << "the backend offers no compression";
  }
  ASSERT_EQ(negotiated, std::vector<std::string>{compressor}) << "handshake did not accept " << compressor;

  CollectionPtr coll = Collection();
  std::vector<Bson> docs = TextDocs(300);
  InsertAll(coll.get(), docs);

  // One large, very compressible document: far more than one zlib/zstd chunk.
  Bson big = Bson().Add("_id", "big").Add("text", std::string(4 * 1024 * 1024, 'z'));
  bson_error_t error;
  ASSERT_TRUE(mongoc_collection_insert_one(coll.get(), big.get(), nullptr, nullptr, &error)) << error.message;

  // And one incompressible document near the size limit, both ways.
  Bson noise = RandomBlobDocument("noise", 15 * 1024 * 1024);
  ASSERT_TRUE(mongoc_collection_insert_one(coll.get(), noise.get(), nullptr, nullptr, &error)) << error.message;
  CursorPtr noise_cursor(mongoc_collection_find_with_opts(coll.get(), Json(R"({"_id": "noise"})").get(), nullptr, nullptr));
  std::vector<Bson> noise_found = Drain(noise_cursor.get());
  ASSERT_EQ(noise_found.size(), 1u);
  EXPECT_EQ(noise_found[0].get()->len, noise.get()->len);
  EXPECT_EQ(std::memcmp(bson_get_data(noise_found[0].get()), bson_get_data(noise.get()), noise.get()->len), 0);

  Bson reply;
  ASSERT_TRUE(mongoc_collection_update_many(coll.get(), Json(R"({"parity": 1})").get(),
                                            Json(R"({"$set": {"odd": true}})").get(), nullptr, reply.out(), &error))
      << error.message;
  EXPECT_EQ(reply.Int("modifiedCount"), 150);

  CursorPtr cursor(mongoc_collection_find_with_opts(coll.get(), Json(R"({"_id": {"$type": "number"}})").get(),
                                                    Json(R"({"sort": {"_id": 1}, "batchSize": 40})").get(), nullptr));
  std::vector<Bson> found = Drain(cursor.get());
  ASSERT_EQ(found.size(), docs.size());
  for (size_t i = 0; i < found.size(); ++i) {
    EXPECT_EQ(found[i].Int("_id"), static_cast<int64_t>(i));
    EXPECT_EQ(found[i].Str("text"), docs[i].Str("text"));
    EXPECT_EQ(found[i].Has("odd"), i % 2 == 1);
  }
  EXPECT_GE(log_.Count("getMore", Phase::kSucceeded), 7u);

  cursor.reset(mongoc_collection_find_with_opts(coll.get(), Json(R"({"_id": "big"})").get(), nullptr, nullptr));
  std::vector<Bson> big_found = Drain(cursor.get());
  ASSERT_EQ(big_found.size(), 1u);
  EXPECT_EQ(big_found[0].Str("text"), big.Str("text"));

  Bson pipeline = Json(R"({"pipeline": [{"$match": {"odd": true}}, {"$count": "n"}]})");
  cursor.reset(mongoc_collection_aggregate(coll.get(), MONGOC_QUERY_NONE, pipeline.get(), nullptr, nullptr));
  std::vector<Bson> counted = Drain(cursor.get());
  ASSERT_EQ(counted.size(), 1u);
  EXPECT_EQ(counted[0].Int("n"), 150);

  // On the wire: OP_MSG compressed with this compressor, both ways, one
  // compressed reply per compressed request.
  const FrameKind compressed{kOpCompressed, kOpMsg, CompressorId(compressor)};
  std::map<FrameKind, int> requests = tap_->Counts(Direction::kToServer);
  std::map<FrameKind, int> replies = tap_->Counts(Direction::kToClient);
  const int commands = Total(requests, compressed);
  EXPECT_GE(commands, 12) << "the driver's commands were not compressed with " << compressor;
  EXPECT_EQ(TotalCompressed(requests), commands) << "requests used another compressor";
  EXPECT_EQ(Total(replies, compressed), commands) << "replies to compressed requests must use " << compressor;
  EXPECT_EQ(TotalCompressed(replies), commands) << "replies used another compressor";
}

INSTANTIATE_TEST_SUITE_P(Compressors, CompressionTest, testing::Values("snappy", "zlib", "zstd"),
                         [](const testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

}  // namespace
}  // namespace e2e
