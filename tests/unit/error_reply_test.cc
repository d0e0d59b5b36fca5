#include "proxy/wire/error_reply.h"

#include <gtest/gtest.h>

#include "proxy/wire/op_msg.h"
#include "proxy/wire/op_query.h"
#include "tests/unit/test_util.h"

namespace remold::wire {
namespace {

using remold::testing::Bytes;
using remold::testing::DocView;
using remold::testing::ToBytes;

WireError SampleError() {
  return WireError{error_codes::kInvalidBSON, "invalid BSON: \"quoted\" and\nnewline",
                   false};
}

TEST(ErrorDocument, HasMongoDbErrorShapeInOrder) {
  Bytes doc = ErrorDocument(SampleError());
  DocView view(doc);
  ASSERT_TRUE(view.valid());
  EXPECT_EQ(view.Keys(), (std::vector<std::string>{"ok", "errmsg", "code", "codeName"}));
  EXPECT_EQ(view.Double("ok"), 0.0) << "ok must be the double 0";
  EXPECT_EQ(view.Utf8("errmsg"), SampleError().message);
  EXPECT_EQ(view.Int32("code"), 22);
  EXPECT_EQ(view.Utf8("codeName"), "InvalidBSON");
}

TEST(ErrorDocument, HelpersUseMongoDbCodes) {
  EXPECT_EQ(ProtocolError("x").code.value, 17);
  EXPECT_EQ(ProtocolError("x").code.name, "ProtocolError");
  EXPECT_FALSE(ProtocolError("x").close_connection);
  EXPECT_TRUE(FatalProtocolError("x").close_connection);
  EXPECT_EQ(InvalidBson("x").code.value, 22);
  EXPECT_EQ(InvalidBson("x").code.name, "InvalidBSON");
}

TEST(EncodeErrorReply, OpMsgRequestGetsOpMsgReply) {
  Bytes reply = EncodeErrorReply(SampleError(), /*request_id=*/123,
                                 static_cast<int32_t>(OpCode::kMsg), /*reply_request_id=*/9000);
  MessageHeader header = ReadHeader(reply);
  EXPECT_EQ(header.message_length, static_cast<int32_t>(reply.size()));
  EXPECT_EQ(header.request_id, 9000);
  EXPECT_EQ(header.response_to, 123);
  EXPECT_EQ(header.op_code, static_cast<int32_t>(OpCode::kMsg));
  OpMsgView view;
  ASSERT_FALSE(ParseOpMsg(reply, view));
  EXPECT_EQ(view.flags, 0u) << "an error reply never has moreToCome";
  EXPECT_TRUE(view.sequences.empty());
  EXPECT_EQ(ToBytes(view.body), ErrorDocument(SampleError()));
}

TEST(EncodeErrorReply, OpQueryRequestGetsOpReply) {
  Bytes reply = EncodeErrorReply(SampleError(), 55, static_cast<int32_t>(OpCode::kQuery), 56);
  MessageHeader header = ReadHeader(reply);
  EXPECT_EQ(header.message_length, static_cast<int32_t>(reply.size()));
  EXPECT_EQ(header.request_id, 56);
  EXPECT_EQ(header.response_to, 55);
  EXPECT_EQ(header.op_code, static_cast<int32_t>(OpCode::kReply));
  OpReplyView view;
  ASSERT_FALSE(ParseOpReply(reply, view));
  EXPECT_EQ(view.cursor_id, 0);
  ASSERT_EQ(view.documents.size(), 1u);
  EXPECT_EQ(ToBytes(view.documents[0]), ErrorDocument(SampleError()));
}

TEST(EncodeErrorReply, OtherOpcodesGetOpMsg) {
  Bytes reply = EncodeErrorReply(ProtocolError("bad"), 1, static_cast<int32_t>(OpCode::kCompressed), 2);
  EXPECT_EQ(ReadHeader(reply).op_code, static_cast<int32_t>(OpCode::kMsg));
  OpMsgView view;
  ASSERT_FALSE(ParseOpMsg(reply, view));
  EXPECT_EQ(DocView(view.body).Utf8("errmsg"), "bad");
}

TEST(EncodeErrorReply, LongMessageIsKeptWhole) {
  WireError error = ProtocolError(std::string(100000, 'e'));
  Bytes reply = EncodeErrorReply(error, 1, static_cast<int32_t>(OpCode::kMsg), 2);
  OpMsgView view;
  ASSERT_FALSE(ParseOpMsg(reply, view));
  EXPECT_EQ(DocView(view.body).Utf8("errmsg")->size(), 100000u);
}

}  // namespace
}  // namespace remold::wire
