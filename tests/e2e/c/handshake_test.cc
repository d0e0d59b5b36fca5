// Topology discovery through remold: the driver's monitoring handshake must
// see one mongos-like endpoint (msg "isdbgrid", no replica-set members that
// would let the driver bypass the proxy), with the backend's wire version
// and size limits. Skipped when no proxy runs.

#include "driver.h"
#include "harness.h"

namespace e2e {
namespace {

using HandshakeTest = DriverTest;

Bson HelloOf(mongoc_client_t* client) {
  ServerDescriptionPtr server = SelectedServer(client);
  return server ? Bson(mongoc_server_description_hello_response(server.get())) : Bson();
}

TEST_F(HandshakeTest, PresentsOneMongosLikeEndpoint) {
  if (!harness::Current().through_proxy) GTEST_SKIP() << "no proxy in front of the backend";

  ServerDescriptionPtr server = SelectedServer(client());
  ASSERT_TRUE(server);
  EXPECT_STREQ(mongoc_server_description_type(server.get()), "Mongos");
  Bson hello(mongoc_server_description_hello_response(server.get()));
  EXPECT_EQ(hello.Str("msg"), std::string("isdbgrid")) << hello.Json();
  for (const char* field : {"hosts", "passives", "arbiters", "setName", "primary", "me"}) {
    EXPECT_FALSE(hello.Has(field)) << field << " leaks the backend topology: " << hello.Json();
  }

  ClientPtr direct = NewClient(BackendUri().get());
  ASSERT_TRUE(direct);
  Bson backend = HelloOf(direct.get());
  EXPECT_EQ(hello.Int("maxWireVersion"), backend.Int("maxWireVersion"));
  EXPECT_EQ(hello.Int("maxBsonObjectSize"), backend.Int("maxBsonObjectSize"));
  EXPECT_EQ(hello.Int("maxMessageSizeBytes"), backend.Int("maxMessageSizeBytes"));
  EXPECT_EQ(hello.Int("maxWriteBatchSize"), backend.Int("maxWriteBatchSize"));

  // And ordinary commands work on the discovered endpoint.
  std::optional<Bson> pong = RunCommand(Json(R"({"ping": 1})"));
  ASSERT_TRUE(pong);
  EXPECT_EQ(pong->Int("ok"), 1);
}

}  // namespace
}  // namespace e2e
