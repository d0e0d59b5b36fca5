// SplitAttributeUpdate (patterns/attribute/update.h): how an update's
// operators split between fixed fields and attributes, and the refusal of
// an operator an attribute cannot take.
#include "patterns/attribute/update.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "ruleset/loader.h"
#include "tests/unit/rule_texts.h"

namespace remold {
namespace {

const AttributeRule& Products() { return testing::ShopProductsAttributeRule(); }

// {$inc: {stock: <a string>}}, the string's bytes as they are.
Doc IncWithString(const std::string& bytes) {
  Doc inc, u;
  bson_append_utf8(inc.mut(), "stock", -1, bytes.data(), static_cast<int>(bytes.size()));
  AppendDoc(u.mut(), "$inc", inc);
  return u;
}

TEST(SplitAttributeUpdate, IncWithAStringIsATypeMismatch) {
  Doc fixed;
  std::vector<AttributeOp> ops;
  std::optional<Refusal> refusal = SplitAttributeUpdate(Products(), IncWithString("two"), fixed, ops);
  ASSERT_TRUE(refusal);
  EXPECT_EQ(refusal->code, error_codes::kTypeMismatch);
  EXPECT_EQ(refusal->message, "Cannot increment with non-numeric argument: {stock: \"two\"}");
}

// A client may send a string that is not UTF-8 (remold's decoder lets it
// through, as mongod's does); Extended JSON cannot show it. The refusal
// once threw std::out_of_range out of the rewrite, ending remold (found by
// fuzz_rewrite).
TEST(SplitAttributeUpdate, IncWithAStringNotUtf8IsATypeMismatch) {
  Doc fixed;
  std::vector<AttributeOp> ops;
  std::optional<Refusal> refusal = SplitAttributeUpdate(Products(), IncWithString("\xce"), fixed, ops);
  ASSERT_TRUE(refusal);
  EXPECT_EQ(refusal->code, error_codes::kTypeMismatch);
  EXPECT_EQ(refusal->message, "Cannot increment with non-numeric argument: {stock: a value JSON cannot show}");
}

}  // namespace
}  // namespace remold
