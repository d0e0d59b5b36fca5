#include "proxy/bson_check.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "tests/unit/test_util.h"

namespace remold::wire {
namespace {

using remold::testing::Bytes;
using remold::testing::Doc;

TEST(DocumentLength, ReturnsThePrefixWhenItFits) {
  Bytes doc = Doc(BCON_NEW("a", BCON_INT32(1)));
  Bytes with_tail = doc;
  with_tail.push_back(0x42);
  EXPECT_EQ(DocumentLength(doc), static_cast<int32_t>(doc.size()));
  EXPECT_EQ(DocumentLength(with_tail), static_cast<int32_t>(doc.size()));
}

TEST(DocumentLength, RejectsImplausiblePrefixes) {
  Bytes doc = Doc(BCON_NEW("a", BCON_INT32(1)));
  EXPECT_EQ(DocumentLength(std::span<const uint8_t>(doc).first(doc.size() - 1)), std::nullopt);
  EXPECT_EQ(DocumentLength(std::span<const uint8_t>(doc).first(4)), std::nullopt);
  Bytes tiny = {4, 0, 0, 0, 0};
  EXPECT_EQ(DocumentLength(tiny), std::nullopt);
  Bytes negative = {0xFF, 0xFF, 0xFF, 0xFF, 0};
  EXPECT_EQ(DocumentLength(negative), std::nullopt);
}

TEST(ValidateDocument, AcceptsNestedDocuments) {
  Bytes doc = Doc(BCON_NEW("insert", "c", "documents", "[", "{", "x", BCON_INT32(1), "}", "]",
                           "$db", "test"));
  EXPECT_FALSE(ValidateDocument(doc).has_value());
  EXPECT_FALSE(ValidateDocument(remold::testing::EmptyDoc()).has_value());
}

TEST(ValidateDocument, RejectsMissingTerminator) {
  Bytes doc = Doc(BCON_NEW("a", BCON_INT32(1)));
  doc.back() = 1;
  auto error = ValidateDocument(doc);
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->code, error_codes::kInvalidBSON);
  EXPECT_FALSE(error->close_connection);
}

TEST(ValidateDocument, RejectsPrefixDisagreeingWithSize) {
  Bytes doc = Doc(BCON_NEW("a", BCON_INT32(1)));
  doc.push_back(0);  // one byte longer than the prefix says
  EXPECT_TRUE(ValidateDocument(doc).has_value());
}

TEST(ValidateDocument, RejectsCorruptNestedDocument) {
  Bytes doc = Doc(BCON_NEW("outer", "{", "inner", BCON_INT32(7), "}"));
  // outer's embedded document starts after: int32 len, type byte, "outer\0".
  size_t inner = 4 + 1 + 6;
  ASSERT_EQ(doc[inner], 16);  // {inner: int32}: 4 + 1 + 6 + 4 + 1
  doc[inner] = 200;           // claims to run past the end of its parent
  auto error = ValidateDocument(doc);
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->code, error_codes::kInvalidBSON);
}

TEST(ValidateDocument, RejectsUnknownElementType) {
  Bytes doc = Doc(BCON_NEW("a", BCON_INT32(1)));
  doc[4] = 0x70;  // not a BSON type
  EXPECT_TRUE(ValidateDocument(doc).has_value());
}

TEST(ValidateDocument, RejectsStringLengthBeyondDocument) {
  Bytes doc = Doc(BCON_NEW("s", "hello"));
  // type(1) "s\0"(2) then the string's int32 length.
  wire::StoreInt32(doc.data() + 4 + 1 + 2, 1000);
  EXPECT_TRUE(ValidateDocument(doc).has_value());
}

TEST(ValidateDocument, InvalidUtf8StringIsNotStructuralDamage) {
  // mongod stores such strings; the codec checks structure, not encoding.
  EXPECT_FALSE(ValidateDocument(remold::testing::DocWithRawString("\xff\xfe")).has_value());
}

// libbson's bson_validate stops at the first string (or key) that is not
// UTF-8 and reports success, so whatever follows it is never checked.
TEST(ValidateDocument, CorruptionAfterInvalidUtf8StringIsRejected) {
  Bytes doc = remold::testing::DocWithRawString("\xff");
  // {s: "\xff", n: 5}: int32 len, 0x02 "s\0", int32 2, "\xff\0", then n's type.
  const size_t n_type = 4 + 1 + 2 + 4 + 2;
  ASSERT_EQ(doc[n_type], 0x10);
  doc[n_type] = 0x70;  // not a BSON type
  auto error = ValidateDocument(doc);
  ASSERT_TRUE(error.has_value()) << "corrupt BSON accepted after a non-UTF-8 string";
  EXPECT_EQ(error->code, error_codes::kInvalidBSON);
}

TEST(ValidateDocument, CorruptNestedDocumentAfterInvalidUtf8KeyIsRejected) {
  bson_t* doc = bson_new();
  BSON_APPEND_INT32(doc, "bad\xff", 1);
  bson_t* inner = BCON_NEW("a", BCON_INT32(1));
  BSON_APPEND_DOCUMENT(doc, "inner", inner);
  bson_destroy(inner);
  Bytes bytes = Doc(doc);
  // inner: int32 len, 0x10 "a\0" int32, NUL. Make its element type unknown.
  const size_t inner_at = 4 + (1 + 5 + 4) + (1 + 6);
  ASSERT_EQ(bytes[inner_at + 4], 0x10);
  bytes[inner_at + 4] = 0x70;
  EXPECT_TRUE(ValidateDocument(bytes).has_value()) << "corrupt BSON accepted after a non-UTF-8 key";
}

TEST(ValidateDocument, HundredLevelsOfNestingAreFine) {
  EXPECT_FALSE(ValidateDocument(remold::testing::NestedDocument(100)).has_value());
}

// A 7 MB document nested a million levels deep (well under the 16 MiB
// limit) must be answered with an error, not a stack overflow. Run in a
// child process so a crash fails this test only.
TEST(ValidateDocumentDeathTest, DeepNestingIsAnErrorNotACrash) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const Bytes doc = remold::testing::NestedDocument(1'000'000);
  EXPECT_EXIT(std::exit(ValidateDocument(doc).has_value() ? 0 : 3), ::testing::ExitedWithCode(0), "")
      << "exit 3: accepted; killed by a signal: crashed (stack overflow)";
}

TEST(FirstKey, IsTheCommandName) {
  EXPECT_EQ(FirstKey(Doc(BCON_NEW("find", "c", "filter", "{", "}"))), "find");
  EXPECT_EQ(FirstKey(remold::testing::EmptyDoc()), "");
}

}  // namespace
}  // namespace remold::wire
