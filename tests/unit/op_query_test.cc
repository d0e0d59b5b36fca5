#include "proxy/wire/op_query.h"

#include <gtest/gtest.h>

#include "tests/unit/test_util.h"

namespace remold::wire {
namespace {

using remold::testing::Bytes;
using remold::testing::Doc;
using remold::testing::OpQueryMessage;
using remold::testing::OpReplyMessage;
using remold::testing::ToBytes;

Bytes IsMaster() { return Doc(BCON_NEW("isMaster", BCON_INT32(1))); }

TEST(ParseOpQuery, ParsesAllFields) {
  Bytes query = IsMaster();
  Bytes message = OpQueryMessage(9, "admin.$cmd", query, /*flags=*/4, /*skip=*/3, /*to_return=*/-1);
  OpQueryView view;
  ASSERT_FALSE(ParseOpQuery(message, view));
  EXPECT_EQ(view.flags, 4);
  EXPECT_EQ(view.full_collection_name, "admin.$cmd");
  EXPECT_EQ(view.number_to_skip, 3);
  EXPECT_EQ(view.number_to_return, -1);
  EXPECT_EQ(ToBytes(view.query), query);
  EXPECT_TRUE(view.return_fields_selector.empty());
  EXPECT_TRUE(view.is_command());
}

TEST(ParseOpQuery, ParsesReturnFieldsSelector) {
  Bytes fields = Doc(BCON_NEW("a", BCON_INT32(1)));
  Bytes message = OpQueryMessage(9, "test.coll", IsMaster(), 0, 0, 10, fields);
  OpQueryView view;
  ASSERT_FALSE(ParseOpQuery(message, view));
  EXPECT_EQ(ToBytes(view.return_fields_selector), fields);
  EXPECT_EQ(view.number_to_return, 10);
  EXPECT_FALSE(view.is_command());
}

TEST(OpQueryView, IsCommandNeedsADatabaseAndDollarCmd) {
  auto is_command = [](std::string_view name) {
    OpQueryView view;
    view.full_collection_name = name;
    return view.is_command();
  };
  EXPECT_TRUE(is_command("admin.$cmd"));
  EXPECT_TRUE(is_command("test.$cmd"));
  EXPECT_FALSE(is_command("test.coll"));
  EXPECT_FALSE(is_command(".$cmd"));
  EXPECT_FALSE(is_command("$cmd"));
  EXPECT_FALSE(is_command("admin.$cmd.x"));
  EXPECT_FALSE(is_command(""));
}

TEST(ParseOpQuery, UnterminatedCollectionNameIsRejected) {
  Bytes message = remold::testing::StartMessage(1, 0, OpCode::kQuery);
  remold::testing::AppendInt32(message, 0);
  message.insert(message.end(), {'a', 'd', 'm', 'i', 'n'});
  remold::testing::FinishMessage(message);
  OpQueryView view;
  auto error = ParseOpQuery(message, view);
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->code, error_codes::kProtocolError);
  EXPECT_NE(error->message.find("NUL"), std::string::npos) << error->message;
}

TEST(ParseOpQuery, TrailingBytesAreRejected) {
  Bytes fields = Doc(BCON_NEW("a", BCON_INT32(1)));
  Bytes message = OpQueryMessage(9, "admin.$cmd", IsMaster(), 0, 0, -1, fields);
  message.push_back(0);
  remold::testing::FinishMessage(message);
  OpQueryView view;
  auto error = ParseOpQuery(message, view);
  ASSERT_TRUE(error.has_value());
  EXPECT_NE(error->message.find("trailing"), std::string::npos) << error->message;
}

TEST(ParseOpQuery, InvalidQueryDocumentIsInvalidBson) {
  Bytes query = IsMaster();
  query[4] = 0x66;  // unknown element type
  OpQueryView view;
  auto error = ParseOpQuery(OpQueryMessage(9, "admin.$cmd", query), view);
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->code, error_codes::kInvalidBSON);
}

TEST(ParseOpQuery, InvalidSelectorIsRejected) {
  Bytes fields = Doc(BCON_NEW("a", BCON_INT32(1)));
  fields.back() = 9;
  OpQueryView view;
  EXPECT_TRUE(ParseOpQuery(OpQueryMessage(9, "admin.$cmd", IsMaster(), 0, 0, -1, fields), view));
}

TEST(ParseOpQuery, EveryTruncationIsRejected) {
  Bytes full = OpQueryMessage(9, "admin.$cmd", IsMaster(), 0, 0, -1,
                              Doc(BCON_NEW("a", BCON_INT32(1))));
  Bytes without_selector = OpQueryMessage(9, "admin.$cmd", IsMaster());
  for (size_t size = kHeaderSize; size < full.size(); ++size) {
    if (size == without_selector.size()) continue;  // a complete message without a selector
    Bytes truncated(full.begin(), full.begin() + size);
    OpQueryView view;
    EXPECT_TRUE(ParseOpQuery(truncated, view).has_value()) << "accepted " << size << " bytes";
  }
}

TEST(ParseOpReply, ParsesFieldsAndDocuments) {
  Bytes a = Doc(BCON_NEW("ok", BCON_DOUBLE(1)));
  Bytes b = Doc(BCON_NEW("x", "y"));
  Bytes message = OpReplyMessage(3, 9, 8, 0x0102030405060708LL, 5, {a, b});
  OpReplyView view;
  ASSERT_FALSE(ParseOpReply(message, view));
  EXPECT_EQ(view.response_flags, 8);
  EXPECT_EQ(view.cursor_id, 0x0102030405060708LL);
  EXPECT_EQ(view.starting_from, 5);
  ASSERT_EQ(view.documents.size(), 2u);
  EXPECT_EQ(ToBytes(view.documents[0]), a);
  EXPECT_EQ(ToBytes(view.documents[1]), b);
}

TEST(ParseOpReply, NumberReturnedMustMatchTheDocuments) {
  Bytes a = Doc(BCON_NEW("ok", BCON_DOUBLE(1)));
  OpReplyView more;
  EXPECT_TRUE(ParseOpReply(OpReplyMessage(1, 1, 0, 0, 0, {a}, /*number_returned=*/2), more));
  OpReplyView fewer;
  EXPECT_TRUE(ParseOpReply(OpReplyMessage(1, 1, 0, 0, 0, {a, a}, /*number_returned=*/1), fewer));
  OpReplyView negative;
  EXPECT_TRUE(ParseOpReply(OpReplyMessage(1, 1, 0, 0, 0, {a}, /*number_returned=*/-1), negative));
}

TEST(ParseOpReply, TooShortIsRejected) {
  Bytes message = OpReplyMessage(1, 1, 0, 0, 0, {});
  message.resize(message.size() - 1);
  OpReplyView view;
  EXPECT_TRUE(ParseOpReply(message, view));
}

TEST(EncodeOpReply, RoundTrips) {
  Bytes doc = Doc(BCON_NEW("ismaster", BCON_BOOL(true), "ok", BCON_DOUBLE(1)));
  OpReplyView reply;
  reply.response_flags = 8;
  reply.cursor_id = -42;
  reply.starting_from = 2;
  reply.documents.push_back(doc);
  Bytes message = EncodeOpReply(100, 7, reply);

  MessageHeader header = ReadHeader(message);
  EXPECT_EQ(header.message_length, static_cast<int32_t>(message.size()));
  EXPECT_EQ(header.request_id, 100);
  EXPECT_EQ(header.response_to, 7);
  EXPECT_EQ(header.op_code, static_cast<int32_t>(OpCode::kReply));
  EXPECT_EQ(message, OpReplyMessage(100, 7, 8, -42, 2, {doc}));

  OpReplyView parsed;
  ASSERT_FALSE(ParseOpReply(message, parsed));
  EXPECT_EQ(parsed.response_flags, 8);
  EXPECT_EQ(parsed.cursor_id, -42);
  EXPECT_EQ(parsed.starting_from, 2);
  ASSERT_EQ(parsed.documents.size(), 1u);
  EXPECT_EQ(ToBytes(parsed.documents[0]), doc);
}

}  // namespace
}  // namespace remold::wire
