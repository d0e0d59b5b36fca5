#include "proxy/wire/op_compressed.h"

#include <gtest/gtest.h>

#include "proxy/wire/op_msg.h"
#include "tests/unit/test_util.h"

namespace remold::wire {
namespace {

using remold::testing::Bytes;
using remold::testing::Doc;

Bytes FindMessage() {
  return EncodeOpMsg(4242, 17, 0,
                     Doc(BCON_NEW("find", "coll", "filter", "{", "x", BCON_INT32(5), "}",
                                  "comment", "a comment a comment a comment", "$db", "test")));
}

// An OP_COMPRESSED envelope built by hand, so every field can be wrong.
Bytes Envelope(int32_t original_opcode, int32_t uncompressed_size, uint8_t compressor_id,
               std::span<const uint8_t> payload, int32_t request_id = 1) {
  Bytes out = remold::testing::StartMessage(request_id, 0, OpCode::kCompressed);
  remold::testing::AppendInt32(out, original_opcode);
  remold::testing::AppendInt32(out, uncompressed_size);
  out.push_back(compressor_id);
  remold::testing::AppendBytes(out, payload);
  remold::testing::FinishMessage(out);
  return out;
}

std::optional<WireError> Decode(const Bytes& message, Bytes& out) {
  Compressor used = Compressor::kNoop;
  return DecompressMessage(message, out, used);
}

class OpCompressedTest : public ::testing::TestWithParam<Compressor> {};

INSTANTIATE_TEST_SUITE_P(AllCompressors, OpCompressedTest,
                         ::testing::Values(Compressor::kNoop, Compressor::kSnappy,
                                           Compressor::kZlib, Compressor::kZstd),
                         [](const auto& info) { return std::string(CompressorName(info.param)); });

TEST_P(OpCompressedTest, CompressWritesTheEnvelope) {
  Bytes original = FindMessage();
  Bytes compressed = CompressMessage(original, GetParam());
  MessageHeader header = ReadHeader(compressed);
  EXPECT_EQ(header.message_length, static_cast<int32_t>(compressed.size()));
  EXPECT_EQ(header.request_id, 4242);
  EXPECT_EQ(header.response_to, 17);
  EXPECT_EQ(header.op_code, static_cast<int32_t>(OpCode::kCompressed));
  EXPECT_EQ(LoadInt32(compressed.data() + 16), static_cast<int32_t>(OpCode::kMsg));
  EXPECT_EQ(LoadInt32(compressed.data() + 20), static_cast<int32_t>(original.size()) - kHeaderSize);
  EXPECT_EQ(compressed[24], static_cast<uint8_t>(GetParam()));
}

TEST_P(OpCompressedTest, RoundTripKeepsIdsAndOpcode) {
  Bytes original = FindMessage();
  Bytes compressed = CompressMessage(original, GetParam());
  Bytes restored;
  Compressor used = Compressor::kNoop;
  auto error = DecompressMessage(compressed, restored, used);
  ASSERT_FALSE(error) << error->message;
  EXPECT_EQ(used, GetParam());
  EXPECT_EQ(restored, original);
  MessageHeader header = ReadHeader(restored);
  EXPECT_EQ(header.message_length, static_cast<int32_t>(restored.size()));
  EXPECT_EQ(header.request_id, 4242);
  EXPECT_EQ(header.response_to, 17);
  EXPECT_EQ(header.op_code, static_cast<int32_t>(OpCode::kMsg));
}

TEST_P(OpCompressedTest, RoundTripsOpQueryAndOpReply) {
  Bytes query = remold::testing::OpQueryMessage(
      8, "admin.$cmd", Doc(BCON_NEW("isMaster", BCON_INT32(1))));
  Bytes reply = remold::testing::OpReplyMessage(
      9, 8, 0, 0, 0, {Doc(BCON_NEW("ismaster", BCON_BOOL(true), "ok", BCON_DOUBLE(1)))});
  for (const Bytes& original : {query, reply}) {
    Bytes restored;
    ASSERT_FALSE(Decode(CompressMessage(original, GetParam()), restored));
    EXPECT_EQ(restored, original);
  }
}

TEST_P(OpCompressedTest, LargeMessageRoundTrips) {
  std::string big(2 << 20, 'z');
  for (size_t i = 0; i < big.size(); i += 97) big[i] = static_cast<char>('a' + i % 23);
  Bytes original = EncodeOpMsg(1, 0, 0, Doc(BCON_NEW("insert", "c", "blob", big.c_str())));
  Bytes restored;
  ASSERT_FALSE(Decode(CompressMessage(original, GetParam()), restored));
  EXPECT_TRUE(restored == original);
}

TEST_P(OpCompressedTest, DeclaredSizeMismatchIsRejected) {
  Bytes original = FindMessage();
  Bytes compressed = CompressMessage(original, GetParam());
  for (int32_t delta : {-1, 1}) {
    Bytes wrong = compressed;
    StoreInt32(wrong.data() + 20, LoadInt32(wrong.data() + 20) + delta);
    Bytes out;
    auto error = Decode(wrong, out);
    ASSERT_TRUE(error.has_value()) << "delta " << delta;
    EXPECT_EQ(error->code, error_codes::kProtocolError);
  }
}

TEST_P(OpCompressedTest, NestedOpCompressedIsRejected) {
  Bytes inner = CompressMessage(FindMessage(), GetParam());
  Bytes outer = CompressMessage(inner, GetParam());
  Bytes out;
  auto error = Decode(outer, out);
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->code, error_codes::kProtocolError);
  EXPECT_NE(error->message.find("2012"), std::string::npos) << error->message;
}

TEST(DecompressMessage, LegacyOpcodesCannotBeWrapped) {
  for (OpCode op : {OpCode::kInsert, OpCode::kUpdate, OpCode::kDelete, OpCode::kGetMore,
                    OpCode::kKillCursors}) {
    Bytes payload(8, 0);
    Bytes out;
    EXPECT_TRUE(Decode(Envelope(static_cast<int32_t>(op), 8, 0, payload), out).has_value())
        << static_cast<int32_t>(op);
  }
}

TEST(DecompressMessage, UnknownCompressorIdIsRejected) {
  Bytes payload(8, 0);
  for (uint8_t id : {uint8_t{4}, uint8_t{200}, uint8_t{255}}) {
    Bytes out;
    auto error = Decode(Envelope(static_cast<int32_t>(OpCode::kMsg), 8, id, payload), out);
    ASSERT_TRUE(error.has_value());
    EXPECT_EQ(error->code, error_codes::kProtocolError);
    EXPECT_NE(error->message.find("compressor id " + std::to_string(id)), std::string::npos)
        << error->message;
  }
}

TEST(DecompressMessage, UncompressedSizeOutOfRangeIsRejected) {
  Bytes payload(8, 0);
  for (int32_t size : {-1, INT32_MIN, kMaxMessageSize - kHeaderSize + 1, INT32_MAX}) {
    Bytes out;
    auto error = Decode(Envelope(static_cast<int32_t>(OpCode::kMsg), size, 0, payload), out);
    ASSERT_TRUE(error.has_value()) << size;
    EXPECT_NE(error->message.find("out of range"), std::string::npos) << error->message;
    EXPECT_LT(out.capacity(), size_t{1} << 20) << "allocated for a rejected size " << size;
  }
}

TEST(DecompressMessage, TooShortIsRejected) {
  Bytes message = Envelope(static_cast<int32_t>(OpCode::kMsg), 0, 0, {});
  message.pop_back();  // no room for the compressor id
  Bytes out;
  EXPECT_TRUE(Decode(message, out).has_value());
}

TEST(DecompressMessage, CorruptPayloadIsRejected) {
  Bytes garbage = {0xDE, 0xAD, 0xBE, 0xEF, 0x00, 0x11, 0x22, 0x33, 0x44};
  for (uint8_t id : {uint8_t{1}, uint8_t{2}, uint8_t{3}}) {
    Bytes out;
    auto error = Decode(Envelope(static_cast<int32_t>(OpCode::kMsg), 40, id, garbage), out);
    ASSERT_TRUE(error.has_value()) << int(id);
    EXPECT_EQ(error->code, error_codes::kProtocolError);
  }
}

TEST(DecompressMessage, NoopEnvelopeRestoresTheHeader) {
  Bytes original = FindMessage();
  std::span<const uint8_t> body = std::span<const uint8_t>(original).subspan(kHeaderSize);
  Bytes out;
  Compressor used = Compressor::kZstd;
  ASSERT_FALSE(DecompressMessage(
      Envelope(static_cast<int32_t>(OpCode::kMsg), static_cast<int32_t>(body.size()), 0, body, 4242),
      out, used));
  EXPECT_EQ(used, Compressor::kNoop);
  MessageHeader header = ReadHeader(out);
  EXPECT_EQ(header.request_id, 4242);
  EXPECT_EQ(header.message_length, static_cast<int32_t>(original.size()));
  EXPECT_EQ(header.op_code, static_cast<int32_t>(OpCode::kMsg));
  EXPECT_TRUE(std::equal(body.begin(), body.end(), out.begin() + kHeaderSize));
}

}  // namespace
}  // namespace remold::wire
