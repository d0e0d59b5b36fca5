#include "proxy/wire/request.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "proxy/wire/op_compressed.h"
#include "proxy/wire/op_msg.h"
#include "tests/unit/test_util.h"

namespace remold::wire {
namespace {

using remold::testing::Bytes;
using remold::testing::Doc;
using remold::testing::OpMsgBuilder;
using remold::testing::OpQueryMessage;
using remold::testing::ToBytes;

Bytes HelloWithCompressors() {
  return Doc(BCON_NEW("hello", BCON_INT32(1), "compression", "[", "zstd", "lz4", "snappy", "noop",
                      "zlib", "snappy", "]", "$db", "admin"));
}

struct Decoded {
  Bytes message;
  Request request;
  std::optional<WireError> error;
};

Decoded DecodeBytes(Bytes message) {
  Decoded d{std::move(message), {}, {}};
  d.error = DecodeRequest(d.message, d.request);
  return d;
}

TEST(DecodeRequest, OpMsgPing) {
  Bytes body = Doc(BCON_NEW("ping", BCON_INT32(1), "$db", "admin"));
  Decoded d = DecodeBytes(EncodeOpMsg(31, 0, 0, body));
  ASSERT_FALSE(d.error) << d.error->message;
  EXPECT_EQ(d.request.command, "ping");
  EXPECT_EQ(d.request.header.request_id, 31);
  EXPECT_EQ(d.request.header.op_code, static_cast<int32_t>(OpCode::kMsg));
  EXPECT_FALSE(d.request.more_to_come);
  EXPECT_FALSE(d.request.is_handshake);
  EXPECT_FALSE(d.request.is_legacy());
  EXPECT_FALSE(d.request.compressor.has_value());
  EXPECT_TRUE(d.request.offered_compressors.empty());
  EXPECT_EQ(ToBytes(d.request.command_document), body);
}

TEST(DecodeRequest, CommandNameIsTheFirstKey) {
  for (const char* name : {"find", "aggregate", "getMore", "killCursors", "endSessions", "x"}) {
    Bytes body = Doc(BCON_NEW(name, "coll", "hello", BCON_INT32(1), "$db", "test"));
    Decoded d = DecodeBytes(EncodeOpMsg(1, 0, 0, body));
    ASSERT_FALSE(d.error);
    EXPECT_EQ(d.request.command, name);
    EXPECT_FALSE(d.request.is_handshake) << "'hello' is not the first key";
  }
}

TEST(DecodeRequest, InsertWithDocumentSequence) {
  Bytes message = OpMsgBuilder(0, 3)
                      .Body(Doc(BCON_NEW("insert", "coll", "ordered", BCON_BOOL(true), "$db", "t")))
                      .Sequence("documents", {Doc(BCON_NEW("_id", BCON_INT32(1)))})
                      .Build();
  Decoded d = DecodeBytes(message);
  ASSERT_FALSE(d.error) << d.error->message;
  EXPECT_EQ(d.request.command, "insert");
  EXPECT_EQ(d.message, message) << "an uncompressed request is forwarded unchanged";
}

TEST(DecodeRequest, MoreToComeMeansNoReply) {
  Bytes body = Doc(BCON_NEW("insert", "coll", "$db", "test"));
  Decoded d = DecodeBytes(EncodeOpMsg(1, 0, msg_flags::kMoreToCome, body));
  ASSERT_FALSE(d.error);
  EXPECT_TRUE(d.request.more_to_come);
}

TEST(DecodeRequest, MoreToComeIsKnownEvenWhenTheBodyIsBad) {
  Bytes body = Doc(BCON_NEW("insert", "coll"));
  body.back() = 0x01;
  Decoded d = DecodeBytes(OpMsgBuilder(msg_flags::kMoreToCome).Body(body).Build());
  ASSERT_TRUE(d.error.has_value());
  EXPECT_TRUE(d.request.more_to_come);
}

TEST(DecodeRequest, ExhaustAllowedHelloIsAHandshake) {
  Bytes body = Doc(BCON_NEW("hello", BCON_INT32(1), "maxAwaitTimeMS", BCON_INT32(10000), "$db", "admin"));
  Decoded d = DecodeBytes(EncodeOpMsg(1, 0, msg_flags::kExhaustAllowed, body));
  ASSERT_FALSE(d.error);
  EXPECT_TRUE(d.request.is_handshake);
  EXPECT_FALSE(d.request.more_to_come);
}

TEST(DecodeRequest, EmptyBodyIsFailedToParse) {
  Decoded d = DecodeBytes(EncodeOpMsg(1, 0, 0, remold::testing::EmptyDoc()));
  ASSERT_TRUE(d.error.has_value());
  EXPECT_EQ(d.error->code, error_codes::kFailedToParse);
  EXPECT_EQ(d.error->code.name, "FailedToParse");
  EXPECT_FALSE(d.error->close_connection);
}

TEST(DecodeRequest, BadChecksumIsAnErrorReplyNotAHangUp) {
  Bytes message = EncodeOpMsg(1, 0, 0, Doc(BCON_NEW("ping", BCON_INT32(1))), true);
  message[message.size() - 1] ^= 0xFF;
  Decoded d = DecodeBytes(message);
  ASSERT_TRUE(d.error.has_value());
  EXPECT_EQ(d.error->code, error_codes::kProtocolError);
  EXPECT_FALSE(d.error->close_connection);
}

TEST(DecodeRequest, ChecksummedRequestIsAccepted) {
  Decoded d = DecodeBytes(EncodeOpMsg(1, 0, 0, Doc(BCON_NEW("ping", BCON_INT32(1))), true));
  ASSERT_FALSE(d.error) << d.error->message;
  EXPECT_EQ(d.request.command, "ping");
}

TEST(DecodeRequest, HandshakeCommandsAreDetected) {
  for (const char* name : {"hello", "isMaster", "ismaster"}) {
    Decoded d = DecodeBytes(EncodeOpMsg(1, 0, 0, Doc(BCON_NEW(name, BCON_INT32(1), "$db", "admin"))));
    ASSERT_FALSE(d.error);
    EXPECT_TRUE(d.request.is_handshake) << name;
    EXPECT_EQ(d.request.command, name);
  }
  for (const char* name : {"Hello", "ISMASTER", "helloWorld", "buildInfo"}) {
    Decoded d = DecodeBytes(EncodeOpMsg(1, 0, 0, Doc(BCON_NEW(name, BCON_INT32(1)))));
    ASSERT_FALSE(d.error);
    EXPECT_FALSE(d.request.is_handshake) << name;
  }
}

TEST(DecodeRequest, OfferedCompressorsKeepOrderAndDropUnsupported) {
  Decoded d = DecodeBytes(EncodeOpMsg(1, 0, 0, HelloWithCompressors()));
  ASSERT_FALSE(d.error);
  ASSERT_TRUE(d.request.is_handshake);
  EXPECT_EQ(d.request.offered_compressors,
            (std::vector<Compressor>{Compressor::kZstd, Compressor::kSnappy, Compressor::kZlib}));
}

TEST(DecodeRequest, CompressorsOfANonHandshakeAreIgnored) {
  Bytes body = Doc(BCON_NEW("ping", BCON_INT32(1), "compression", "[", "zstd", "]"));
  Decoded d = DecodeBytes(EncodeOpMsg(1, 0, 0, body));
  ASSERT_FALSE(d.error);
  EXPECT_TRUE(d.request.offered_compressors.empty());
}

TEST(DecodeRequest, LegacyOpQueryIsMaster) {
  Bytes query = Doc(BCON_NEW("isMaster", BCON_INT32(1), "compression", "[", "snappy", "zlib", "]",
                             "client", "{", "driver", "{", "name", "test", "}", "}"));
  Decoded d = DecodeBytes(OpQueryMessage(12, "admin.$cmd", query));
  ASSERT_FALSE(d.error) << d.error->message;
  EXPECT_TRUE(d.request.is_legacy());
  EXPECT_TRUE(d.request.is_handshake);
  EXPECT_EQ(d.request.command, "isMaster");
  EXPECT_EQ(d.request.header.request_id, 12);
  EXPECT_EQ(ToBytes(d.request.command_document), query);
  EXPECT_EQ(d.request.offered_compressors,
            (std::vector<Compressor>{Compressor::kSnappy, Compressor::kZlib}));
}

TEST(DecodeRequest, LegacyQueryWrappedInDollarQuery) {
  Bytes inner = Doc(BCON_NEW("isMaster", BCON_INT32(1), "compression", "[", "zlib", "]"));
  bson_t* wrapped = bson_new();
  bson_t inner_bson;
  ASSERT_TRUE(bson_init_static(&inner_bson, inner.data(), inner.size()));
  BSON_APPEND_DOCUMENT(wrapped, "$query", &inner_bson);
  BCON_APPEND(wrapped, "$readPreference", "{", "mode", "primaryPreferred", "}");
  Decoded d = DecodeBytes(OpQueryMessage(1, "admin.$cmd", Doc(wrapped)));
  ASSERT_FALSE(d.error) << d.error->message;
  EXPECT_EQ(d.request.command, "isMaster");
  EXPECT_TRUE(d.request.is_handshake);
  EXPECT_EQ(ToBytes(d.request.command_document), inner);
  EXPECT_EQ(d.request.offered_compressors, std::vector<Compressor>{Compressor::kZlib});
}

TEST(DecodeRequest, LegacyQueryWrappedInQuery) {
  Bytes query = Doc(BCON_NEW("query", "{", "ismaster", BCON_INT32(1), "}"));
  Decoded d = DecodeBytes(OpQueryMessage(1, "admin.$cmd", query));
  ASSERT_FALSE(d.error);
  EXPECT_EQ(d.request.command, "ismaster");
  EXPECT_TRUE(d.request.is_handshake);
}

TEST(DecodeRequest, DollarQueryThatIsNotADocumentStaysTheCommand) {
  Bytes query = Doc(BCON_NEW("$query", BCON_INT32(1)));
  Decoded d = DecodeBytes(OpQueryMessage(1, "admin.$cmd", query));
  ASSERT_FALSE(d.error);
  EXPECT_EQ(d.request.command, "$query");
  EXPECT_FALSE(d.request.is_handshake);
}

TEST(DecodeRequest, OpQueryOnACollectionIsUnsupported) {
  Decoded d = DecodeBytes(OpQueryMessage(1, "test.coll", Doc(BCON_NEW("x", BCON_INT32(1)))));
  ASSERT_TRUE(d.error.has_value());
  EXPECT_EQ(d.error->code, error_codes::kUnsupportedOpQueryCommand);
  EXPECT_EQ(d.error->code.name, "UnsupportedOpQueryCommand");
  EXPECT_FALSE(d.error->close_connection);
}

class CompressedRequestTest : public ::testing::TestWithParam<Compressor> {};

INSTANTIATE_TEST_SUITE_P(AllCompressors, CompressedRequestTest,
                         ::testing::Values(Compressor::kNoop, Compressor::kSnappy,
                                           Compressor::kZlib, Compressor::kZstd),
                         [](const auto& info) { return std::string(CompressorName(info.param)); });

TEST_P(CompressedRequestTest, IsDecompressedInPlace) {
  Bytes original = EncodeOpMsg(77, 0, msg_flags::kMoreToCome,
                               Doc(BCON_NEW("delete", "coll", "$db", "test")));
  Decoded d = DecodeBytes(CompressMessage(original, GetParam()));
  ASSERT_FALSE(d.error) << d.error->message;
  EXPECT_EQ(d.request.compressor, GetParam());
  EXPECT_EQ(d.message, original);
  EXPECT_EQ(d.request.header.op_code, static_cast<int32_t>(OpCode::kMsg));
  EXPECT_EQ(d.request.header.request_id, 77);
  EXPECT_EQ(d.request.header.message_length, static_cast<int32_t>(original.size()));
  EXPECT_EQ(d.request.command, "delete");
  EXPECT_TRUE(d.request.more_to_come);
  // The view points into the decompressed message now held by `message`.
  EXPECT_GE(d.request.command_document.data(), d.message.data());
  EXPECT_LE(d.request.command_document.data() + d.request.command_document.size(),
            d.message.data() + d.message.size());
}

TEST_P(CompressedRequestTest, CompressedLegacyHandshake) {
  Bytes original = OpQueryMessage(5, "admin.$cmd", Doc(BCON_NEW("isMaster", BCON_INT32(1))));
  Decoded d = DecodeBytes(CompressMessage(original, GetParam()));
  ASSERT_FALSE(d.error) << d.error->message;
  EXPECT_TRUE(d.request.is_legacy());
  EXPECT_TRUE(d.request.is_handshake);
}

TEST(DecodeRequest, CorruptCompressedRequestIsAnError) {
  Bytes compressed = CompressMessage(EncodeOpMsg(1, 0, 0, Doc(BCON_NEW("ping", BCON_INT32(1)))),
                                     Compressor::kZstd);
  compressed.resize(compressed.size() - 3);
  remold::testing::FinishMessage(compressed);
  Decoded d = DecodeBytes(compressed);
  ASSERT_TRUE(d.error.has_value());
  EXPECT_EQ(d.error->code, error_codes::kProtocolError);
}

TEST(DecodeRequest, CompressedOpReplyFromAClientHangsUp) {
  Bytes reply = remold::testing::OpReplyMessage(1, 0, 0, 0, 0, {Doc(BCON_NEW("ok", BCON_INT32(1)))});
  Decoded d = DecodeBytes(CompressMessage(reply, Compressor::kSnappy));
  ASSERT_TRUE(d.error.has_value());
  EXPECT_TRUE(d.error->close_connection);
}

TEST(DecodeRequest, RemovedLegacyOpcodesHangUp) {
  for (int32_t op : {1, 2001, 2002, 2005, 2006, 2007, 9999, 0, -1}) {
    Bytes message = remold::testing::StartMessage(1, 0, OpCode::kMsg);
    StoreInt32(message.data() + 12, op);
    remold::testing::AppendBytes(message, Doc(BCON_NEW("x", BCON_INT32(1))));
    remold::testing::FinishMessage(message);
    Decoded d = DecodeBytes(message);
    ASSERT_TRUE(d.error.has_value()) << op;
    EXPECT_TRUE(d.error->close_connection) << op;
    EXPECT_NE(d.error->message.find(std::to_string(op)), std::string::npos) << d.error->message;
  }
}

TEST(DecodeRequest, CorruptBodyAfterInvalidUtf8IsInvalidBson) {
  bson_t* body = bson_new();
  BSON_APPEND_UTF8(body, "find", "coll");
  bson_append_utf8(body, "comment", -1, "\xc3", 1);  // truncated UTF-8 sequence
  BSON_APPEND_INT32(body, "limit", 1);
  Bytes bytes = Doc(body);
  bytes[bytes.size() - 1 - 4 - 6 - 1] = 0x70;  // limit's type byte: not a BSON type
  Decoded d = DecodeBytes(OpMsgBuilder().Body(bytes).Build());
  ASSERT_TRUE(d.error.has_value()) << "structurally corrupt body accepted";
  EXPECT_EQ(d.error->code, error_codes::kInvalidBSON);
}

// One client message must not be able to take the proxy down.
TEST(DecodeRequestDeathTest, DeeplyNestedBodyIsAnErrorNotACrash) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const size_t depth = 2'000'000;  // 14 MB, under the 16 MiB document limit
  Bytes nested = remold::testing::NestedDocument(depth);
  bson_t* cmd = BCON_NEW("find", "coll");
  bson_t filter;
  ASSERT_TRUE(bson_init_static(&filter, nested.data(), nested.size()));
  BSON_APPEND_DOCUMENT(cmd, "filter", &filter);
  const Bytes message = OpMsgBuilder().Body(Doc(cmd)).Build();
  EXPECT_EXIT(
      {
        Decoded d = DecodeBytes(message);
        std::exit(d.error.has_value() ? 0 : 3);
      },
      ::testing::ExitedWithCode(0), "")
      << "exit 3: accepted; killed by a signal: crashed (stack overflow)";
}

TEST(DecodeRequest, InvalidBsonIsInvalidBson) {
  Bytes body = Doc(BCON_NEW("find", "coll", "filter", "{", "a", BCON_INT32(1), "}"));
  body[4] = 0x55;
  Decoded d = DecodeBytes(OpMsgBuilder().Body(body).Build());
  ASSERT_TRUE(d.error.has_value());
  EXPECT_EQ(d.error->code, error_codes::kInvalidBSON);
  EXPECT_EQ(d.error->code.name, "InvalidBSON");
}

}  // namespace
}  // namespace remold::wire
