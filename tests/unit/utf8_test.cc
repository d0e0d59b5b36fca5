// Error messages are valid UTF-8 whatever they quote (common/utf8.h): the
// replacement itself, and the two builders of error replies, remold's own
// refusals (rewrite/command.h) and decoding errors (proxy/wire/error_reply.h).
#include "common/utf8.h"

#include <bson/bson.h>
#include <gtest/gtest.h>

#include <string>

#include "proxy/wire/error_reply.h"
#include "rewrite/command.h"

namespace remold {
namespace {

const std::string kReplacement = "\xEF\xBF\xBD";

TEST(ValidUtf8Test, KeepsWellFormedText) {
  for (const std::string text : {std::string(""), std::string("plain ascii"), std::string("caf\xC3\xA9"),
                                 std::string("\xE2\x82\xAC 5"), std::string("\xF0\x9F\x98\x80"),
                                 std::string("\xF4\x8F\xBF\xBF"), std::string("nul\0inside", 10)})
    EXPECT_EQ(ValidUtf8(text), text);
}

TEST(ValidUtf8Test, ReplacesEachByteThatStartsNoWellFormedSequence) {
  EXPECT_EQ(ValidUtf8("a\xFF" "b"), "a" + kReplacement + "b");
  EXPECT_EQ(ValidUtf8("\xC0\xAF"), kReplacement + kReplacement);                  // overlong '/'
  EXPECT_EQ(ValidUtf8("\xE0\x80\xAF"), kReplacement + kReplacement + kReplacement);  // overlong
  EXPECT_EQ(ValidUtf8("\xED\xA0\x80"), kReplacement + kReplacement + kReplacement);  // a surrogate
  EXPECT_EQ(ValidUtf8("\xF4\x90\x80\x80"), kReplacement + kReplacement + kReplacement + kReplacement);  // > U+10FFFF
  EXPECT_EQ(ValidUtf8("end \xE2\x82"), "end " + kReplacement + kReplacement);       // cut short
  EXPECT_EQ(ValidUtf8("\x80" "caf\xC3\xA9"), kReplacement + "caf\xC3\xA9");
}

bool HasValidErrmsg(const uint8_t* data, size_t size, const std::string& expected) {
  bson_t doc;
  bson_iter_t it;
  if (!bson_init_static(&doc, data, size) || !bson_iter_init_find(&it, &doc, "errmsg") || !BSON_ITER_HOLDS_UTF8(&it))
    return false;
  uint32_t length = 0;
  const char* text = bson_iter_utf8(&it, &length);
  return bson_utf8_validate(text, length, true) && std::string(text, length) == expected;
}

TEST(ValidUtf8Test, ErrorRepliesQuoteClientBytesAsValidUtf8) {
  const Doc refusal = ErrorReply(ErrorCode{72, "InvalidOptions"}, "field 'a\xFF' is not allowed");
  EXPECT_TRUE(HasValidErrmsg(refusal.bytes().data(), refusal.bytes().size(),
                             "field 'a" + kReplacement + "' is not allowed"));
  const std::vector<uint8_t> decoding = wire::ErrorDocument(wire::ProtocolError("bad \xC0\xAF"));
  EXPECT_TRUE(HasValidErrmsg(decoding.data(), decoding.size(), "bad " + kReplacement + kReplacement));
}

}  // namespace
}  // namespace remold
