#include "proxy/wire/op_msg.h"

#include <gtest/gtest.h>

#include "proxy/wire/crc32c.h"
#include "tests/unit/test_util.h"

namespace remold::wire {
namespace {

using remold::testing::Bytes;
using remold::testing::Doc;
using remold::testing::OpMsgBuilder;
using remold::testing::ToBytes;

Bytes Ping() { return Doc(BCON_NEW("ping", BCON_INT32(1), "$db", "admin")); }
Bytes Insert() { return Doc(BCON_NEW("insert", "coll", "$db", "test")); }
Bytes Row(int i) { return Doc(BCON_NEW("_id", BCON_INT32(i), "v", "row")); }

std::optional<WireError> Parse(const Bytes& message, OpMsgView& view) {
  return ParseOpMsg(message, view);
}

void ExpectProtocolError(const Bytes& message, std::string_view fragment = "") {
  OpMsgView view;
  std::optional<WireError> error = Parse(message, view);
  ASSERT_TRUE(error.has_value()) << "accepted a bad OP_MSG";
  EXPECT_EQ(error->code, error_codes::kProtocolError) << error->message;
  EXPECT_NE(error->message.find(fragment), std::string::npos) << error->message;
}

TEST(ParseOpMsg, ParsesKind0Body) {
  Bytes body = Ping();
  Bytes message = OpMsgBuilder().Body(body).Build();
  OpMsgView view;
  ASSERT_FALSE(Parse(message, view));
  EXPECT_EQ(view.flags, 0u);
  EXPECT_EQ(ToBytes(view.body), body);
  EXPECT_TRUE(view.sequences.empty());
  EXPECT_FALSE(view.more_to_come());
  EXPECT_FALSE(view.checksum_present());
  EXPECT_FALSE(view.exhaust_allowed());
  // Views point into the message, not into copies.
  EXPECT_EQ(view.body.data(), message.data() + kHeaderSize + 4 + 1);
}

TEST(ParseOpMsg, ParsesKind0AndKind1Sections) {
  Bytes message = OpMsgBuilder().Body(Insert()).Sequence("documents", {Row(1), Row(2)}).Build();
  OpMsgView view;
  ASSERT_FALSE(Parse(message, view));
  EXPECT_EQ(ToBytes(view.body), Insert());
  ASSERT_EQ(view.sequences.size(), 1u);
  EXPECT_EQ(view.sequences[0].identifier, "documents");
  ASSERT_EQ(view.sequences[0].documents.size(), 2u);
  EXPECT_EQ(ToBytes(view.sequences[0].documents[0]), Row(1));
  EXPECT_EQ(ToBytes(view.sequences[0].documents[1]), Row(2));
}

TEST(ParseOpMsg, SequenceMayPrecedeBody) {
  Bytes message = OpMsgBuilder().Sequence("documents", {Row(1)}).Body(Insert()).Build();
  OpMsgView view;
  ASSERT_FALSE(Parse(message, view));
  EXPECT_EQ(ToBytes(view.body), Insert());
  ASSERT_EQ(view.sequences.size(), 1u);
  EXPECT_EQ(view.sequences[0].documents.size(), 1u);
}

TEST(ParseOpMsg, ParsesSeveralSequencesAndAnEmptyOne) {
  Bytes update = Doc(BCON_NEW("update", "coll", "$db", "test"));
  Bytes message = OpMsgBuilder()
                      .Body(update)
                      .Sequence("updates", {Row(1), Row(2), Row(3)})
                      .Sequence("other", {})
                      .Build();
  OpMsgView view;
  ASSERT_FALSE(Parse(message, view));
  ASSERT_EQ(view.sequences.size(), 2u);
  EXPECT_EQ(view.sequences[0].identifier, "updates");
  EXPECT_EQ(view.sequences[0].documents.size(), 3u);
  EXPECT_EQ(view.sequences[1].identifier, "other");
  EXPECT_TRUE(view.sequences[1].documents.empty());
}

TEST(ParseOpMsg, GoodChecksumIsAccepted) {
  Bytes message = OpMsgBuilder(msg_flags::kChecksumPresent)
                      .Body(Insert())
                      .Sequence("documents", {Row(1)})
                      .BuildWithChecksum();
  OpMsgView view;
  ASSERT_FALSE(Parse(message, view));
  EXPECT_TRUE(view.checksum_present());
  EXPECT_EQ(ToBytes(view.body), Insert());
  ASSERT_EQ(view.sequences.size(), 1u);
  EXPECT_EQ(view.sequences[0].documents.size(), 1u);
}

TEST(ParseOpMsg, WrongChecksumIsRejected) {
  Bytes message = OpMsgBuilder(msg_flags::kChecksumPresent).Body(Ping()).BuildWithChecksum();
  message.back() ^= 0x80;
  ExpectProtocolError(message, "checksum");
}

TEST(ParseOpMsg, ChangedBodyUnderChecksumIsRejected) {
  Bytes message = OpMsgBuilder(msg_flags::kChecksumPresent).Body(Ping()).BuildWithChecksum();
  // Flip the int32 value of "ping" (still valid BSON, so only the CRC can tell).
  message[kHeaderSize + 4 + 1 + 4 + 1 + 5] ^= 0x02;
  ExpectProtocolError(message, "checksum");
}

TEST(ParseOpMsg, ChecksumFlagWithoutRoomForChecksumIsRejected) {
  Bytes message = OpMsgBuilder(msg_flags::kChecksumPresent).Raw(Bytes{0, 1, 2}).Build();
  ExpectProtocolError(message);
}

TEST(ParseOpMsg, ChecksumFlagWithoutChecksumIsRejected) {
  // The flag is set but the last four bytes are really the body's tail.
  Bytes message = OpMsgBuilder(msg_flags::kChecksumPresent).Body(Ping()).Build();
  ExpectProtocolError(message);
}

TEST(ParseOpMsg, UnknownRequiredFlagBitsAreRejected) {
  for (int bit = 2; bit < 16; ++bit) {
    Bytes message = OpMsgBuilder(1u << bit).Body(Ping()).Build();
    SCOPED_TRACE("bit " + std::to_string(bit));
    ExpectProtocolError(message, "flag");
  }
}

TEST(ParseOpMsg, OptionalFlagBitsAreAccepted) {
  for (int bit = 16; bit < 32; ++bit) {
    Bytes message = OpMsgBuilder(1u << bit).Body(Ping()).Build();
    OpMsgView view;
    EXPECT_FALSE(Parse(message, view)) << "bit " << bit;
    EXPECT_EQ(view.flags, 1u << bit);
  }
}

TEST(ParseOpMsg, ExhaustAllowedAndMoreToComeAreReported) {
  Bytes message =
      OpMsgBuilder(msg_flags::kExhaustAllowed | msg_flags::kMoreToCome).Body(Ping()).Build();
  OpMsgView view;
  ASSERT_FALSE(Parse(message, view));
  EXPECT_TRUE(view.exhaust_allowed());
  EXPECT_TRUE(view.more_to_come());
  EXPECT_EQ(PeekOpMsgFlags(message), msg_flags::kExhaustAllowed | msg_flags::kMoreToCome);
}

TEST(ParseOpMsg, DuplicateBodyIsRejected) {
  ExpectProtocolError(OpMsgBuilder().Body(Ping()).Body(Ping()).Build(), "kind-0");
}

TEST(ParseOpMsg, MissingBodyIsRejected) {
  ExpectProtocolError(OpMsgBuilder().Sequence("documents", {Row(1)}).Build(), "no kind-0");
}

TEST(ParseOpMsg, FlagsOnlyIsRejected) { ExpectProtocolError(OpMsgBuilder().Build()); }

TEST(ParseOpMsg, UnknownSectionKindIsRejected) {
  Bytes message = OpMsgBuilder().Body(Ping()).Raw(Bytes{2}).Raw(Row(1)).Build();
  ExpectProtocolError(message, "unknown section kind 2");
}

TEST(ParseOpMsg, SequenceSizeBeyondMessageIsRejected) {
  Bytes message = OpMsgBuilder().Body(Insert()).Sequence("documents", {Row(1)}).Build();
  size_t size_at = kHeaderSize + 4 + 1 + Insert().size() + 1;
  StoreInt32(message.data() + size_at, LoadInt32(message.data() + size_at) + 1);
  ExpectProtocolError(message, "sequence size");
}

TEST(ParseOpMsg, SequenceSizeTooSmallIsRejected) {
  for (int32_t size : {-1, 0, 3, 4}) {
    Bytes message = OpMsgBuilder().Body(Insert()).Sequence("documents", {Row(1)}).Build();
    size_t size_at = kHeaderSize + 4 + 1 + Insert().size() + 1;
    StoreInt32(message.data() + size_at, size);
    SCOPED_TRACE("size " + std::to_string(size));
    ExpectProtocolError(message);
  }
}

TEST(ParseOpMsg, SequenceCuttingADocumentIsRejected) {
  Bytes message = OpMsgBuilder().Body(Insert()).Sequence("documents", {Row(1), Row(2)}).Build();
  size_t size_at = kHeaderSize + 4 + 1 + Insert().size() + 1;
  // Shrink the sequence by 3 bytes: its last document no longer fits, and
  // the 3 orphaned bytes that follow are not a valid section either.
  StoreInt32(message.data() + size_at, LoadInt32(message.data() + size_at) - 3);
  OpMsgView view;
  EXPECT_TRUE(Parse(message, view).has_value());
}

TEST(ParseOpMsg, TruncatedSequenceHeaderIsRejected) {
  Bytes message = OpMsgBuilder().Body(Insert()).Raw(Bytes{1, 10, 0}).Build();
  ExpectProtocolError(message, "truncated");
}

TEST(ParseOpMsg, UnterminatedSequenceIdentifierIsRejected) {
  Bytes message = OpMsgBuilder().Body(Insert()).Raw(Bytes{1, 8, 0, 0, 0, 'd', 'o', 'c', 's'}).Build();
  ExpectProtocolError(message, "NUL");
}

TEST(ParseOpMsg, EmptySequenceIdentifierIsRejected) {
  Bytes message = OpMsgBuilder().Body(Insert()).Sequence("", {Row(1)}).Build();
  ExpectProtocolError(message, "empty");
}

TEST(ParseOpMsg, EveryTruncationIsRejected) {
  // The body comes last, so no prefix ends on a complete message.
  Bytes message = OpMsgBuilder(msg_flags::kChecksumPresent)
                      .Sequence("documents", {Row(1), Row(2)})
                      .Body(Insert())
                      .BuildWithChecksum();
  Bytes plain = OpMsgBuilder().Sequence("documents", {Row(1), Row(2)}).Body(Insert()).Build();
  for (const Bytes* full : {&message, &plain}) {
    for (size_t size = kHeaderSize; size < full->size(); ++size) {
      Bytes truncated(full->begin(), full->begin() + size);
      remold::wire::StoreInt32(truncated.data(), static_cast<int32_t>(size));
      OpMsgView view;
      EXPECT_TRUE(Parse(truncated, view).has_value()) << "accepted " << size << " of " << full->size();
    }
  }
}

TEST(ParseOpMsg, InvalidBodyBsonIsInvalidBson) {
  Bytes body = Ping();
  body.back() = 7;  // no terminating NUL
  OpMsgView view;
  auto error = Parse(OpMsgBuilder().Body(body).Build(), view);
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->code, error_codes::kInvalidBSON);
  EXPECT_FALSE(error->close_connection);
}

TEST(ParseOpMsg, InvalidDocumentInSequenceIsRejected) {
  Bytes row = Row(1);
  row[4] = 0x77;  // unknown element type
  OpMsgView view;
  auto error = Parse(OpMsgBuilder().Body(Insert()).Sequence("documents", {row}).Build(), view);
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->code, error_codes::kInvalidBSON);
}

TEST(EncodeOpMsg, RoundTripsWithChecksum) {
  Bytes body = Ping();
  uint32_t flags = msg_flags::kMoreToCome | msg_flags::kExhaustAllowed;
  Bytes message = EncodeOpMsg(77, 12, flags, body, /*with_checksum=*/true);
  MessageHeader header = ReadHeader(message);
  EXPECT_EQ(header.message_length, static_cast<int32_t>(message.size()));
  EXPECT_EQ(header.request_id, 77);
  EXPECT_EQ(header.response_to, 12);
  EXPECT_EQ(header.op_code, static_cast<int32_t>(OpCode::kMsg));
  EXPECT_EQ(message.size(), kHeaderSize + 4 + 1 + body.size() + 4);
  EXPECT_EQ(LoadUint32(message.data() + message.size() - 4),
            Crc32c(std::span<const uint8_t>(message).first(message.size() - 4)));

  OpMsgView view;
  ASSERT_FALSE(Parse(message, view));
  EXPECT_EQ(view.flags, flags | msg_flags::kChecksumPresent);
  EXPECT_EQ(ToBytes(view.body), body);
}

TEST(EncodeOpMsg, RoundTripsWithoutChecksum) {
  Bytes body = Insert();
  Bytes message = EncodeOpMsg(5, 0, 0, body);
  EXPECT_EQ(message, OpMsgBuilder(0, 5, 0).Body(body).Build());
  OpMsgView view;
  ASSERT_FALSE(Parse(message, view));
  EXPECT_EQ(ToBytes(view.body), body);
  EXPECT_FALSE(view.checksum_present());
}

TEST(EncodeOpMsg, DropsChecksumFlagWhenNotAskedForOne) {
  Bytes message = EncodeOpMsg(1, 0, msg_flags::kChecksumPresent | msg_flags::kMoreToCome, Ping());
  EXPECT_EQ(PeekOpMsgFlags(message), msg_flags::kMoreToCome);
  OpMsgView view;
  EXPECT_FALSE(Parse(message, view));
}

}  // namespace
}  // namespace remold::wire
