#include "proxy/wire/backend_compression.h"

#include <gtest/gtest.h>

#include "proxy/wire/op_msg.h"
#include "proxy/wire/op_query.h"
#include "tests/unit/test_util.h"

namespace remold::wire {
namespace {

using remold::testing::Bytes;
using remold::testing::Doc;
using remold::testing::Json;
using remold::testing::OpQueryMessage;

const std::vector<Compressor> kZstdSnappy = {Compressor::kZstd, Compressor::kSnappy};

std::string BodyJson(const std::vector<uint8_t>& message) {
  OpMsgView view;
  EXPECT_FALSE(ParseOpMsg(message, view).has_value());
  return Json(view.body);
}

TEST(BackendCompression, HandshakeAndAuthenticationStayPlain) {
  for (const char* command : {"hello", "isMaster", "ismaster", "saslStart", "saslContinue", "getnonce",
                              "authenticate", "createUser", "updateUser", "copydbSaslStart", "copydbgetnonce",
                              "copydb"})
    EXPECT_FALSE(MayCompress(command)) << command;
  for (const char* command : {"find", "insert", "aggregate", "getMore", "dropUser", "helloWorld"})
    EXPECT_TRUE(MayCompress(command)) << command;
}

TEST(BackendCompression, OpMsgHandshakeGetsRemoldsOfferInPlaceOfTheClients) {
  const Bytes hello = Doc(BCON_NEW("hello", BCON_INT32(1), "client", "{", "application", "{", "name", "app", "}", "}",
                                   "compression", "[", "snappy", "zlib", "]", "$db", "admin"));
  const std::vector<uint8_t> message = EncodeOpMsg(7, 0, 0, hello);
  std::optional<std::vector<uint8_t>> offered = WithCompressionOffer(message, kZstdSnappy);
  ASSERT_TRUE(offered.has_value());
  EXPECT_EQ(ReadHeader(*offered).request_id, 7);
  EXPECT_EQ(BodyJson(*offered),
            R"({ "hello" : 1, "client" : { "application" : { "name" : "app" } }, "$db" : "admin", )"
            R"("compression" : [ "zstd", "snappy" ] })");
}

TEST(BackendCompression, OpMsgChecksumIsRecomputed) {
  const Bytes hello = Doc(BCON_NEW("hello", BCON_INT32(1), "$db", "admin"));
  const std::vector<uint8_t> message = EncodeOpMsg(7, 0, msg_flags::kChecksumPresent, hello, true);
  std::optional<std::vector<uint8_t>> offered = WithCompressionOffer(message, kZstdSnappy);
  ASSERT_TRUE(offered.has_value());
  OpMsgView view;
  EXPECT_FALSE(ParseOpMsg(*offered, view).has_value());  // the checksum is checked
  EXPECT_TRUE(view.checksum_present());
}

TEST(BackendCompression, LegacyOpQueryHandshakeKeepsWhatSurroundsTheQuery) {
  const Bytes query = Doc(BCON_NEW("isMaster", BCON_INT32(1), "client", "{", "driver", "{", "name", "d", "}", "}"));
  const Bytes fields = Doc(BCON_NEW("x", BCON_INT32(1)));
  const Bytes message = OpQueryMessage(9, "admin.$cmd", query, 4, 0, -1, fields);
  std::optional<std::vector<uint8_t>> offered = WithCompressionOffer(message, kZstdSnappy);
  ASSERT_TRUE(offered.has_value());
  OpQueryView view;
  ASSERT_FALSE(ParseOpQuery(*offered, view).has_value());
  EXPECT_EQ(ReadHeader(*offered).message_length, static_cast<int32_t>(offered->size()));
  EXPECT_EQ(view.flags, 4);
  EXPECT_EQ(view.full_collection_name, "admin.$cmd");
  EXPECT_EQ(view.number_to_return, -1);
  EXPECT_EQ(Json(view.query),
            R"({ "isMaster" : 1, "client" : { "driver" : { "name" : "d" } }, "compression" : [ "zstd", "snappy" ] })");
  EXPECT_EQ(Json(view.return_fields_selector), R"({ "x" : 1 })");
}

TEST(BackendCompression, WrappedLegacyQueryGetsTheOfferInside) {
  const Bytes query = Doc(BCON_NEW("$query", "{", "isMaster", BCON_INT32(1), "}", "$readPreference", "{", "mode",
                                   "primaryPreferred", "}"));
  std::optional<std::vector<uint8_t>> offered =
      WithCompressionOffer(OpQueryMessage(9, "admin.$cmd", query), {{Compressor::kZlib}});
  ASSERT_TRUE(offered.has_value());
  OpQueryView view;
  ASSERT_FALSE(ParseOpQuery(*offered, view).has_value());
  EXPECT_EQ(Json(view.query), R"({ "$query" : { "isMaster" : 1, "compression" : [ "zlib" ] }, )"
                              R"("$readPreference" : { "mode" : "primaryPreferred" } })");
}

TEST(BackendCompression, MalformedHandshakeIsLeftAlone) {
  Bytes message = EncodeOpMsg(7, 0, 0, Doc(BCON_NEW("hello", BCON_INT32(1))));
  message[message.size() - 1] = 5;  // the body's terminator
  EXPECT_FALSE(WithCompressionOffer(message, kZstdSnappy).has_value());
}

TEST(BackendCompression, OwnOfferIsAnIsMasterWithoutClientMetadata) {
  EXPECT_EQ(Json(OfferHelloCommand(kZstdSnappy)),
            R"({ "isMaster" : 1, "compression" : [ "zstd", "snappy" ], "$db" : "admin" })");
}

TEST(BackendCompression, ChosenIsTheFirstOfTheReplyThatWasOffered) {
  const Bytes reply = Doc(BCON_NEW("ok", BCON_DOUBLE(1), "compression", "[", "zlib", "snappy", "zstd", "]"));
  EXPECT_EQ(ChosenCompressor(reply, kZstdSnappy), Compressor::kSnappy);
  const Bytes none = Doc(BCON_NEW("ok", BCON_DOUBLE(1)));
  EXPECT_EQ(ChosenCompressor(none, kZstdSnappy), std::nullopt);
  const Bytes other = Doc(BCON_NEW("ok", BCON_DOUBLE(1), "compression", "[", "zlib", "]"));
  EXPECT_EQ(ChosenCompressor(other, kZstdSnappy), std::nullopt);
}

}  // namespace
}  // namespace remold::wire
