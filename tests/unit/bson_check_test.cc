#include "proxy/wire/bson_check.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <vector>

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

// The oracle: libbson's own iterator over every element, recursively (what
// ValidateDocument used before it walked the bytes itself). A document it
// reads to the end without error is one remold's code can trust.
bool LibbsonReadsToTheEnd(const uint8_t* data, size_t length, int depth = 0) {
  if (depth > 200) return false;
  bson_t doc;
  bson_iter_t iter;
  if (!bson_init_static(&doc, data, length) || !bson_iter_init(&iter, &doc)) return false;
  while (bson_iter_next(&iter)) {
    uint32_t child_length = 0;
    const uint8_t* child = nullptr;
    if (BSON_ITER_HOLDS_DOCUMENT(&iter)) bson_iter_document(&iter, &child_length, &child);
    else if (BSON_ITER_HOLDS_ARRAY(&iter)) bson_iter_array(&iter, &child_length, &child);
    else if (BSON_ITER_HOLDS_CODEWSCOPE(&iter)) bson_iter_codewscope(&iter, nullptr, &child_length, &child);
    else continue;
    if (!child || !LibbsonReadsToTheEnd(child, child_length, depth + 1)) return false;
  }
  return iter.err_off == 0;
}

// One element of every BSON type, nested twice.
Bytes EveryType() {
  bson_t* scope = BCON_NEW("x", BCON_INT32(1));
  bson_t* doc = bson_new();
  bson_oid_t oid;
  bson_oid_init_from_string(&oid, "5f1d7f3e9d1e8b0a1c2d3e4f");
  bson_decimal128_t dec;
  bson_decimal128_from_string("1.5", &dec);
  const uint8_t bin[] = {1, 2, 3};
  BSON_APPEND_DOUBLE(doc, "d", 1.5);
  BSON_APPEND_UTF8(doc, "s", "text");
  bson_t* inner = BCON_NEW("a", "[", BCON_INT32(1), BCON_INT64(2), "]", "n", BCON_NULL);
  BSON_APPEND_DOCUMENT(doc, "doc", inner);
  BSON_APPEND_BINARY(doc, "b", BSON_SUBTYPE_BINARY, bin, sizeof bin);
  BSON_APPEND_BINARY(doc, "old", BSON_SUBTYPE_BINARY_DEPRECATED, bin, sizeof bin);
  BSON_APPEND_UNDEFINED(doc, "u");
  BSON_APPEND_OID(doc, "o", &oid);
  BSON_APPEND_BOOL(doc, "t", true);
  BSON_APPEND_DATE_TIME(doc, "at", 1700000000000);
  BSON_APPEND_NULL(doc, "z");
  BSON_APPEND_REGEX(doc, "re", "^a.*b", "i");
  BSON_APPEND_DBPOINTER(doc, "p", "db.c", &oid);
  BSON_APPEND_CODE(doc, "js", "function(){}");
  BSON_APPEND_SYMBOL(doc, "sym", "sym");
  BSON_APPEND_CODE_WITH_SCOPE(doc, "cws", "x+1", scope);
  BSON_APPEND_INT32(doc, "i", 7);
  BSON_APPEND_TIMESTAMP(doc, "ts", 1, 2);
  BSON_APPEND_INT64(doc, "l", 8);
  BSON_APPEND_DECIMAL128(doc, "dec", &dec);
  BSON_APPEND_MINKEY(doc, "min");
  BSON_APPEND_MAXKEY(doc, "max");
  bson_t* outer = bson_new();
  BSON_APPEND_DOCUMENT(outer, "all", doc);
  BSON_APPEND_INT32(outer, "after", 1);
  bson_destroy(inner);
  bson_destroy(doc);
  bson_destroy(scope);
  return Doc(outer);
}

TEST(ValidateDocument, AcceptsEveryType) {
  const Bytes doc = EveryType();
  ASSERT_TRUE(LibbsonReadsToTheEnd(doc.data(), doc.size()));
  EXPECT_FALSE(ValidateDocument(doc).has_value());
}

// Damaged copies of a document of every type (bytes changed, inserted,
// removed; lengths nudged), each judged by ValidateDocument and libbson's
// iterator: they must agree on every one.
TEST(ValidateDocument, AgreesWithLibbsonOnDamagedDocuments) {
  const Bytes original = EveryType();
  std::mt19937 random(20261202);
  int rejected = 0;
  for (int round = 0; round < 200'000; ++round) {
    Bytes doc = original;
    const int edits = 1 + static_cast<int>(random() % 3);
    for (int e = 0; e < edits; ++e) {
      const size_t at = random() % doc.size();
      switch (random() % 5) {
        case 0: doc[at] = static_cast<uint8_t>(random()); break;
        case 1: doc[at] = static_cast<uint8_t>(doc[at] + (random() % 2 ? 1 : -1)); break;
        case 2: doc[at] = static_cast<uint8_t>(random() % 3 == 0 ? 0 : random() % 0x14); break;
        case 3: doc.insert(doc.begin() + static_cast<ptrdiff_t>(at), static_cast<uint8_t>(random())); break;
        case 4: if (doc.size() > 5) doc.erase(doc.begin() + static_cast<ptrdiff_t>(at)); break;
      }
    }
    if (random() % 2) StoreInt32(doc.data(), static_cast<int32_t>(doc.size()));  // keep the prefix true
    const bool libbson = LibbsonReadsToTheEnd(doc.data(), doc.size());
    const bool remold = !ValidateDocument(doc).has_value();
    ASSERT_EQ(remold, libbson) << "round " << round << ", " << doc.size() << " bytes";
    rejected += !remold;
  }
  EXPECT_GT(rejected, 10'000);
  EXPECT_LT(rejected, 190'000);
}

TEST(ValidateDocument, HundredLevelsOfNestingAreFine) {
  EXPECT_FALSE(ValidateDocument(remold::testing::NestedDocument(100)).has_value());
}

// mongod refuses a request nested deeper than 200 levels with Overflow (15),
// not InvalidBSON (22): drivers and test suites look for that code.
TEST(ValidateDocument, NestingBeyondTwoHundredLevelsIsOverflow) {
  const auto error = ValidateDocument(remold::testing::NestedDocument(1'000));
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->code, remold::error_codes::kOverflow);
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
