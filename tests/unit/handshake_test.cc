#include "proxy/wire/handshake.h"

#include <gtest/gtest.h>

#include "proxy/wire/op_msg.h"
#include "proxy/wire/op_query.h"
#include "tests/unit/test_util.h"

namespace remold::wire {
namespace {

using remold::testing::Bytes;
using remold::testing::Doc;
using remold::testing::DocView;
using remold::testing::Json;
using remold::testing::ToBytes;

const std::vector<Compressor> kZstdSnappy = {Compressor::kZstd, Compressor::kSnappy};

bson_oid_t Oid(const char* hex) {
  bson_oid_t oid;
  bson_oid_init_from_string(&oid, hex);
  return oid;
}

Bytes TopologyVersion() {
  bson_oid_t process_id = Oid("65a1b2c3d4e5f60718293a4b");
  return Doc(BCON_NEW("processId", BCON_OID(&process_id), "counter", BCON_INT64(6)));
}

// What a replica-set primary answers to hello.
Bytes ReplicaSetHello(int32_t max_message_size = 48'000'000) {
  const Bytes topology_version = TopologyVersion();
  bson_oid_t election_id = Oid("7fffffff0000000000000003");
  bson_t tv;
  bson_init_static(&tv, topology_version.data(), topology_version.size());
  bson_t* reply = BCON_NEW(
      "topologyVersion", BCON_DOCUMENT(&tv),
      "hosts", "[", "a.example:27017", "b.example:27017", "]",
      "passives", "[", "c.example:27017", "]",
      "arbiters", "[", "d.example:27017", "]",
      "setName", "rs0", "setVersion", BCON_INT32(3),
      "isWritablePrimary", BCON_BOOL(true), "secondary", BCON_BOOL(false),
      "primary", "a.example:27017", "me", "a.example:27017",
      "arbiterOnly", BCON_BOOL(false), "passive", BCON_BOOL(false), "hidden", BCON_BOOL(false),
      "tags", "{", "dc", "east", "}",
      "electionId", BCON_OID(&election_id),
      "lastWrite", "{", "majorityWriteDate", BCON_DATE_TIME(1000), "}",
      "isreplicaset", BCON_BOOL(false),
      "msg", "backend message",
      "maxBsonObjectSize", BCON_INT32(16777216),
      "maxMessageSizeBytes", BCON_INT32(max_message_size),
      "maxWriteBatchSize", BCON_INT32(100000),
      "localTime", BCON_DATE_TIME(1700000000000),
      "logicalSessionTimeoutMinutes", BCON_INT32(30),
      "connectionId", BCON_INT32(57),
      "minWireVersion", BCON_INT32(0), "maxWireVersion", BCON_INT32(21),
      "readOnly", BCON_BOOL(false),
      "compression", "[", "snappy", "zstd", "zlib", "]",
      "saslSupportedMechs", "[", "SCRAM-SHA-256", "]",
      "ok", BCON_DOUBLE(1));
  return Doc(reply);
}

TEST(IsHandshakeCommand, KnowsHelloAndBothIsMasterSpellings) {
  EXPECT_TRUE(IsHandshakeCommand("hello"));
  EXPECT_TRUE(IsHandshakeCommand("isMaster"));
  EXPECT_TRUE(IsHandshakeCommand("ismaster"));
  EXPECT_FALSE(IsHandshakeCommand("IsMaster"));
  EXPECT_FALSE(IsHandshakeCommand("hello "));
  EXPECT_FALSE(IsHandshakeCommand(""));
}

TEST(OfferedCompressors, KeepsSupportedOnesInOrderOnce) {
  Bytes hello = Doc(BCON_NEW("hello", BCON_INT32(1), "compression", "[", "zlib", "lz4", "noop",
                             "zstd", "zlib", BCON_INT32(3), "snappy", "]"));
  EXPECT_EQ(OfferedCompressors(hello),
            (std::vector<Compressor>{Compressor::kZlib, Compressor::kZstd, Compressor::kSnappy}));
}

TEST(OfferedCompressors, NoneWhenAbsentOrNotAnArray) {
  EXPECT_TRUE(OfferedCompressors(Doc(BCON_NEW("hello", BCON_INT32(1)))).empty());
  EXPECT_TRUE(OfferedCompressors(Doc(BCON_NEW("hello", BCON_INT32(1), "compression", "zstd"))).empty());
  EXPECT_TRUE(OfferedCompressors(Doc(BCON_NEW("hello", BCON_INT32(1), "compression", "[", "]"))).empty());
}

TEST(RewriteHandshakeReply, RemovesReplicaSetMembership) {
  Bytes out = RewriteHandshakeReply(ReplicaSetHello(), kZstdSnappy);
  DocView view(out);
  ASSERT_TRUE(view.valid());
  for (const char* key : {"hosts", "passives", "arbiters", "setName", "setVersion", "primary", "me",
                          "secondary", "arbiterOnly", "passive", "hidden", "tags", "electionId",
                          "lastWrite", "isreplicaset"}) {
    EXPECT_FALSE(view.Has(key)) << key << " survived: " << Json(out);
  }
}

TEST(RewriteHandshakeReply, PresentsItselfAsMongos) {
  Bytes out = RewriteHandshakeReply(ReplicaSetHello(), kZstdSnappy);
  DocView view(out);
  EXPECT_EQ(view.Utf8("msg"), "isdbgrid");
  // Exactly one msg field.
  auto keys = view.Keys();
  EXPECT_EQ(std::count(keys.begin(), keys.end(), "msg"), 1) << Json(out);
}

TEST(RewriteHandshakeReply, LeavesAFailedHandshakeAsItIs) {
  bson_t* reply = BCON_NEW("ok", BCON_DOUBLE(0), "errmsg", "Authentication failed.", "code",
                           BCON_INT32(18), "codeName", "AuthenticationFailed");
  Bytes in(bson_get_data(reply), bson_get_data(reply) + reply->len);
  bson_destroy(reply);
  Bytes out = RewriteHandshakeReply(in, kZstdSnappy);
  EXPECT_EQ(out, in) << Json(out);
}

TEST(RewriteHandshakeReply, CompressionIsTheNegotiatedList) {
  Bytes out = RewriteHandshakeReply(ReplicaSetHello(), kZstdSnappy);
  DocView view(out);
  EXPECT_EQ(view.StringArray("compression"), (std::vector<std::string>{"zstd", "snappy"}));
  auto keys = view.Keys();
  EXPECT_EQ(std::count(keys.begin(), keys.end(), "compression"), 1) << Json(out);
}

TEST(RewriteHandshakeReply, NoCompressionWhenNothingNegotiated) {
  Bytes out = RewriteHandshakeReply(ReplicaSetHello(), {});
  EXPECT_FALSE(DocView(out).Has("compression")) << Json(out);
}

TEST(RewriteHandshakeReply, CompressionAddedEvenIfBackendHadNone) {
  Bytes reply = Doc(BCON_NEW("ismaster", BCON_BOOL(true), "maxWireVersion", BCON_INT32(8), "ok",
                             BCON_DOUBLE(1)));
  Bytes out = RewriteHandshakeReply(reply, std::vector<Compressor>{Compressor::kZlib});
  EXPECT_EQ(DocView(out).StringArray("compression"), std::vector<std::string>{"zlib"});
}

TEST(RewriteHandshakeReply, KeepsVersionsSessionsLimitsAndAuth) {
  Bytes in = ReplicaSetHello();
  Bytes out = RewriteHandshakeReply(in, kZstdSnappy);
  DocView view(out);
  EXPECT_EQ(view.Sub("topologyVersion"), TopologyVersion()) << Json(out);
  EXPECT_EQ(view.Int32("maxWireVersion"), 21);
  EXPECT_EQ(view.Int32("minWireVersion"), 0);
  EXPECT_EQ(view.Int32("logicalSessionTimeoutMinutes"), 30);
  EXPECT_EQ(view.Int32("maxBsonObjectSize"), 16777216);
  EXPECT_EQ(view.Int32("maxMessageSizeBytes"), 48'000'000);
  EXPECT_EQ(view.Int32("maxWriteBatchSize"), 100000);
  EXPECT_EQ(view.Int32("connectionId"), 57);
  EXPECT_EQ(view.Bool("isWritablePrimary"), true);
  EXPECT_EQ(view.Bool("readOnly"), false);
  EXPECT_EQ(view.Type("localTime"), BSON_TYPE_DATE_TIME);
  EXPECT_EQ(view.StringArray("saslSupportedMechs"), std::vector<std::string>{"SCRAM-SHA-256"});
  EXPECT_EQ(view.Double("ok"), 1.0);
}

TEST(RewriteHandshakeReply, CapsMaxMessageSize) {
  Bytes out = RewriteHandshakeReply(ReplicaSetHello(64 * 1024 * 1024), {});
  EXPECT_EQ(DocView(out).Int32("maxMessageSizeBytes"), kMaxMessageSize);
}

TEST(RewriteHandshakeReply, KeepsSmallerMaxMessageSize) {
  Bytes out = RewriteHandshakeReply(ReplicaSetHello(1'000'000), {});
  EXPECT_EQ(DocView(out).Int32("maxMessageSizeBytes"), 1'000'000);
}

TEST(RewriteHandshakeReply, CapsMaxMessageSizeAtRemoldsLimit) {
  Bytes out = RewriteHandshakeReply(ReplicaSetHello(), {}, 2'000'000);
  EXPECT_EQ(DocView(out).Int32("maxMessageSizeBytes"), 2'000'000);
  out = RewriteHandshakeReply(ReplicaSetHello(1'000'000), {}, 2'000'000);
  EXPECT_EQ(DocView(out).Int32("maxMessageSizeBytes"), 1'000'000);
}

TEST(RewriteHandshakeReply, AddsRemoldsLimitWhenTheBackendGaveNone) {
  Bytes reply = Doc(BCON_NEW("ismaster", BCON_BOOL(true), "ok", BCON_DOUBLE(1.0)));
  EXPECT_EQ(DocView(RewriteHandshakeReply(reply, {}, 2'000'000)).Int32("maxMessageSizeBytes"),
            2'000'000);
  EXPECT_FALSE(DocView(RewriteHandshakeReply(reply, {})).Has("maxMessageSizeBytes"));
}

TEST(RewriteHandshakeMessage, PassesTheLimitOn) {
  Bytes message = EncodeOpMsg(7, 3, 0, ReplicaSetHello());
  ASSERT_TRUE(RewriteHandshakeMessage(message, {}, 2'000'000));
  OpMsgView view;
  ASSERT_FALSE(ParseOpMsg(message, view));
  EXPECT_EQ(DocView(view.body).Int32("maxMessageSizeBytes"), 2'000'000);
}

TEST(RewriteHandshakeReply, KeepsTheBackendFieldOrder) {
  Bytes out = RewriteHandshakeReply(ReplicaSetHello(), kZstdSnappy);
  std::vector<std::string> keys = DocView(out).Keys();
  ASSERT_FALSE(keys.empty());
  EXPECT_EQ(keys.front(), "topologyVersion");
  auto ok = std::find(keys.begin(), keys.end(), "ok");
  auto max_wire = std::find(keys.begin(), keys.end(), "maxWireVersion");
  EXPECT_LT(max_wire, ok);
}

TEST(RewriteHandshakeMessage, OpMsgKeepsIdsAndMoreToCome) {
  uint32_t flags = msg_flags::kMoreToCome;
  Bytes message = EncodeOpMsg(900, 41, flags, ReplicaSetHello());
  ASSERT_TRUE(RewriteHandshakeMessage(message, kZstdSnappy));
  MessageHeader header = ReadHeader(message);
  EXPECT_EQ(header.message_length, static_cast<int32_t>(message.size()));
  EXPECT_EQ(header.request_id, 900);
  EXPECT_EQ(header.response_to, 41);
  EXPECT_EQ(header.op_code, static_cast<int32_t>(OpCode::kMsg));
  OpMsgView view;
  ASSERT_FALSE(ParseOpMsg(message, view));
  EXPECT_TRUE(view.more_to_come());
  EXPECT_EQ(ToBytes(view.body), RewriteHandshakeReply(ReplicaSetHello(), kZstdSnappy));
}

TEST(RewriteHandshakeMessage, OpMsgChecksumIsRecomputed) {
  Bytes message = EncodeOpMsg(3, 2, 0, ReplicaSetHello(), /*with_checksum=*/true);
  ASSERT_TRUE(RewriteHandshakeMessage(message, {}));
  OpMsgView view;
  auto error = ParseOpMsg(message, view);
  ASSERT_FALSE(error) << error->message;
  EXPECT_TRUE(view.checksum_present());
  EXPECT_EQ(DocView(view.body).Utf8("msg"), "isdbgrid");
}

TEST(RewriteHandshakeMessage, OpReplyKeepsIdsFlagsAndCursor) {
  Bytes message = remold::testing::OpReplyMessage(500, 12, 8, 0, 0, {ReplicaSetHello()});
  ASSERT_TRUE(RewriteHandshakeMessage(message, kZstdSnappy));
  MessageHeader header = ReadHeader(message);
  EXPECT_EQ(header.message_length, static_cast<int32_t>(message.size()));
  EXPECT_EQ(header.request_id, 500);
  EXPECT_EQ(header.response_to, 12);
  EXPECT_EQ(header.op_code, static_cast<int32_t>(OpCode::kReply));
  OpReplyView view;
  ASSERT_FALSE(ParseOpReply(message, view));
  EXPECT_EQ(view.response_flags, 8);
  ASSERT_EQ(view.documents.size(), 1u);
  DocView doc(view.documents[0]);
  EXPECT_EQ(doc.Utf8("msg"), "isdbgrid");
  EXPECT_FALSE(doc.Has("hosts"));
  EXPECT_EQ(doc.StringArray("compression"), (std::vector<std::string>{"zstd", "snappy"}));
}

TEST(RewriteHandshakeMessage, MalformedRepliesAreLeftUntouched) {
  Bytes bad_bson = ReplicaSetHello();
  bad_bson.back() = 1;
  std::vector<Bytes> messages = {
      remold::testing::OpMsgBuilder().Body(bad_bson).Build(),
      remold::testing::OpMsgBuilder()
          .Body(ReplicaSetHello())
          .Sequence("docs", {Doc(BCON_NEW("a", BCON_INT32(1)))})
          .Build(),
      remold::testing::OpReplyMessage(1, 1, 0, 0, 0, {ReplicaSetHello(), ReplicaSetHello()}),
      remold::testing::OpReplyMessage(1, 1, 0, 0, 0, {}),
      remold::testing::OpQueryMessage(1, "admin.$cmd", ReplicaSetHello()),
  };
  for (size_t i = 0; i < messages.size(); ++i) {
    Bytes copy = messages[i];
    EXPECT_FALSE(RewriteHandshakeMessage(copy, kZstdSnappy)) << "message " << i;
    EXPECT_EQ(copy, messages[i]) << "message " << i;
  }
}

}  // namespace
}  // namespace remold::wire
