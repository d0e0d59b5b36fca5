// RewriteAttributeFilter (patterns/attribute/filter.h) with attribute names
// that are not valid as text: the rewrite carries the bytes as they are and
// never builds its expressions from them as JSON.
#include "patterns/attribute/filter.h"

#include <gtest/gtest.h>

#include <string>

#include "ruleset/loader.h"
#include "tests/unit/rule_texts.h"

namespace remold {
namespace {

const AttributeRule& Products() { return testing::ShopProductsAttributeRule(); }

// {<name>: {$size: 2}}, the name's bytes as they are.
Doc SizeFilter(const std::string& name) {
  Doc size, filter;
  BSON_APPEND_INT32(size.mut(), "$size", 2);
  bson_append_document(filter.mut(), name.data(), static_cast<int>(name.size()), size.get());
  return filter;
}

// The $literal the rewrite compares the pair names with.
std::string BoundName(const Doc& filter) {
  bson_iter_t it;
  EXPECT_TRUE(bson_iter_init(&it, filter.get()));
  EXPECT_TRUE(bson_iter_find_descendant(&it, "$and.1.$expr.$gt.0.$size.$filter.cond.$and.0.$eq.1.$literal", &it) ||
              (bson_iter_init(&it, filter.get()) &&
               bson_iter_find_descendant(&it, "$expr.$gt.0.$size.$filter.cond.$and.0.$eq.1.$literal", &it)));
  if (!BSON_ITER_HOLDS_UTF8(&it)) return "<not a string>";
  uint32_t length = 0;
  const char* text = bson_iter_utf8(&it, &length);
  return std::string(text, length);
}

TEST(RewriteAttributeFilter, SizeOfANameThatIsNotValidText) {
  for (const std::string name : {std::string("ports"), std::string("a\"b\\c"), std::string("\xff\xfe"),
                                 std::string("q\"\xc3")}) {
    FilterRewrite rewrite = RewriteAttributeFilter(Products(), SizeFilter(name).get());
    ASSERT_FALSE(rewrite.error) << *rewrite.error;
    EXPECT_EQ(BoundName(rewrite.filter), name);
  }
}

}  // namespace
}  // namespace remold
