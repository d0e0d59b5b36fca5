// How the loader types a plain scalar (rules/yaml_type.h): the hand-written
// matchers of the YAML 1.2 core schema's integers and floats agree with the
// schema's regular expressions on every short string, and a long scalar is
// typed without recursion (std::regex overflowed the stack on one).
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "rules/yaml_type.h"
#include "ruleset/loader.h"

namespace remold {
namespace {

// Every string of up to four characters of an alphabet that reaches every
// branch of both expressions (and strays from them).
TEST(CoreSchemaScalars, MatchersAgreeWithTheSchemaExpressions) {
  const std::regex int_text("[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+");
  const std::regex float_text(
      "[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?|[-+]?\\.(inf|Inf|INF)|\\.nan|\\.NaN|\\.NAN");
  const std::string alphabet = "0189.eE+-oxaAfFg";
  std::vector<std::string> texts = {"", ".inf", "-.Inf", "+.INF", ".nan", ".NaN", ".NAN", "-.nan",
                                    ".in", "0x", "0o", "0o8", "0xg", "1e", "1e+", ".e1"};
  std::vector<std::string> level = {""};
  for (int length = 1; length <= 4; ++length) {
    std::vector<std::string> next;
    for (const std::string& prefix : level)
      for (char c : alphabet) next.push_back(prefix + c);
    texts.insert(texts.end(), next.begin(), next.end());
    level = std::move(next);
  }
  for (const std::string& text : texts) {
    EXPECT_EQ(IsCoreInt(text), std::regex_match(text, int_text)) << "'" << text << "'";
    EXPECT_EQ(IsCoreFloat(text), std::regex_match(text, float_text)) << "'" << text << "'";
  }
}

TEST(CoreSchemaScalars, ALongPlainScalarIsTyped) {
  const std::string digits(200'000, '7');
  RuleLoadResult as_int = LoadRuleText(
      "namespace: shop.products\npattern: attribute\nattribute:\n  array: " + digits + "\n  except: [a]\n",
      "products.yaml");
  ASSERT_EQ(as_int.errors.size(), 1u);
  EXPECT_EQ(as_int.errors[0].substr(0, 50), "products.yaml:4: 'array' is the integer 7777777777");
  RuleLoadResult as_float = LoadRuleText(
      "namespace: shop.products\npattern: attribute\nattribute:\n  array: 1." + digits + "e5\n  except: [a]\n",
      "products.yaml");
  ASSERT_EQ(as_float.errors.size(), 1u);
  EXPECT_EQ(as_float.errors[0].substr(0, 45), "products.yaml:4: 'array' is the number 1.7777");
  const std::string name(200'000, 'n');
  RuleLoadResult as_name = LoadRuleText(
      "namespace: shop.products\npattern: attribute\nattribute:\n  array: " + name + "\n  except: [a]\n",
      "products.yaml");
  EXPECT_TRUE(as_name.errors.empty()) << as_name.errors.front().substr(0, 200);
}

}  // namespace
}  // namespace remold
