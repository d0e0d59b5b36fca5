// The computed rules the loader accepts (ruleset/loader.h), checked field by
// field through ComputedRule (ruleset/rule.h). The refused ones are data,
// under loader/computed/.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "ruleset/loader.h"
#include "tests/golden/temp_dir.h"

namespace remold {
namespace {

// A valid cross-collection rule, with every kind of maintained field.
const char* kComputed = R"(namespace: blog.comments
pattern: computed
computed:
  aggregates:
    - target: posts
      link: postId
      fields:
        commentCount: count
        replies: {count: true}
        starSum: {sum: stars}
        firstAt: {min: createdAt}
        lastAt: {max: createdAt}
        lastBy: {latest: author, by: createdAt}
      derived:
        avgStars: {divide: [starSum, commentCount]}
    - target: people.authors
      link: {from: author, to: name}
      create_target: true
      fields:
        comments: count
)";

// The ComputedRule of `text`, which must load.
ComputedRule LoadComputed(const std::string& text) {
  RuleLoadResult result = LoadRuleText(text, "c.yaml");
  EXPECT_TRUE(result.errors.empty()) << result.errors.front() << "\n" << text;
  if (!result.rules || result.rules->rules().size() != 1) return {};
  return std::get<ComputedRule>(result.rules->rules()[0].pattern);
}

const std::string kHead = "namespace: blog.comments\npattern: computed\ncomputed:\n";

// Lines 1-4 are kHead and "  fields:"; `out` is on line 5.
std::string WithExpression(const std::string& expression) {
  return kHead + "  fields:\n    out: " + expression + "\n";
}

// Lines 1-7 are kHead and an aggregate of posts; the fields start on line 8.
std::string WithMaintained(const std::string& fields) {
  return kHead + "  aggregates:\n    - target: posts\n      link: postId\n      fields:\n" + fields;
}

TEST(ComputedRuleLoader, ValidCrossCollectionRule) {
  TempDir dir;
  std::string source = dir.Write("comments.yaml", kComputed);
  RuleLoadResult result = LoadRuleDirectory(dir.path().string());
  ASSERT_TRUE(result.errors.empty()) << result.errors.front();
  ASSERT_TRUE(result.rules);
  const Rule* rule = result.rules->Find("blog", "comments");
  ASSERT_TRUE(rule);
  EXPECT_EQ(rule->name, "comments");
  EXPECT_EQ(rule->source, source);
  const auto& c = std::get<ComputedRule>(rule->pattern);
  EXPECT_EQ(c.logical, (Namespace{"blog", "comments"}));
  EXPECT_TRUE(c.fields.empty());
  EXPECT_EQ(c.on_client_write, ComputedRule::ClientWrite::kReject);  // the default
  ASSERT_EQ(c.aggregates.size(), 2u);

  const ComputedAggregate& posts = c.aggregates[0];
  EXPECT_EQ(posts.target, (Namespace{"blog", "posts"}));  // the rule's database
  EXPECT_EQ(posts.link_from, "postId");
  EXPECT_EQ(posts.link_to, "_id");
  EXPECT_FALSE(posts.create_target);
  ASSERT_EQ(posts.fields.size(), 6u);
  using Op = MaintainedField::Op;
  struct Expected {
    const char* field;
    Op op;
    const char* of;
    const char* by;
    const char* by_field;
  };
  const Expected expected[] = {
      {"commentCount", Op::kCount, "", "", ""}, {"replies", Op::kCount, "", "", ""},
      {"starSum", Op::kSum, "stars", "", ""},   {"firstAt", Op::kMin, "createdAt", "", ""},
      {"lastAt", Op::kMax, "createdAt", "", ""}, {"lastBy", Op::kLatest, "author", "createdAt", "lastAt"},
  };
  for (size_t i = 0; i < std::size(expected); ++i) {
    SCOPED_TRACE(expected[i].field);
    EXPECT_EQ(posts.fields[i].field, expected[i].field);
    EXPECT_EQ(posts.fields[i].op, expected[i].op);
    EXPECT_EQ(posts.fields[i].of, expected[i].of);
    EXPECT_EQ(posts.fields[i].by, expected[i].by);
    EXPECT_EQ(posts.fields[i].by_field, expected[i].by_field);
  }
  ASSERT_EQ(posts.derived.size(), 1u);
  EXPECT_EQ(posts.derived[0].field, "avgStars");
  EXPECT_EQ(posts.derived[0].inputs, (std::vector<std::string>{"commentCount", "starSum"}));
  const Expression& avg = posts.derived[0].expression;
  EXPECT_EQ(avg.kind, Expression::Kind::kDivide);
  ASSERT_EQ(avg.operands.size(), 2u);
  EXPECT_EQ(avg.operands[0].kind, Expression::Kind::kField);
  EXPECT_EQ(avg.operands[0].path, "starSum");
  EXPECT_EQ(avg.operands[1].path, "commentCount");
  // The link first, then each source field once.
  EXPECT_EQ(posts.inputs, (std::vector<std::string>{"postId", "stars", "createdAt", "author"}));

  const ComputedAggregate& authors = c.aggregates[1];
  EXPECT_EQ(authors.target, (Namespace{"people", "authors"}));
  EXPECT_EQ(authors.link_from, "author");
  EXPECT_EQ(authors.link_to, "name");
  EXPECT_TRUE(authors.create_target);
  ASSERT_EQ(authors.fields.size(), 1u);
  EXPECT_EQ(authors.fields[0].op, Op::kCount);
  EXPECT_TRUE(authors.derived.empty());
  EXPECT_EQ(authors.inputs, (std::vector<std::string>{"author"}));
}

TEST(ComputedRuleLoader, TargetAndLinkForms) {
  ComputedRule c = LoadComputed(kHead +
                                "  aggregates:\n"
                                "    - target: blog.posts\n"
                                "      link: {from: postId}\n"
                                "      create_target: false\n"
                                "      fields: {n: count}\n"
                                "    - target: stats.daily.posts\n"
                                "      link: {from: postId, to: post}\n"
                                "      fields: {n: count}\n"
                                "  on_client_write: overwrite\n");
  ASSERT_EQ(c.aggregates.size(), 2u);
  EXPECT_EQ(c.aggregates[0].target, (Namespace{"blog", "posts"}));
  EXPECT_EQ(c.aggregates[0].link_from, "postId");
  EXPECT_EQ(c.aggregates[0].link_to, "_id");
  EXPECT_FALSE(c.aggregates[0].create_target);
  // A collection name may hold dots: the database is up to the first.
  EXPECT_EQ(c.aggregates[1].target, (Namespace{"stats", "daily.posts"}));
  EXPECT_EQ(c.aggregates[1].link_to, "post");
  EXPECT_EQ(c.on_client_write, ComputedRule::ClientWrite::kOverwrite);
}

TEST(ComputedRuleLoader, SameDocumentFields) {
  ComputedRule c = LoadComputed(kHead +
                                "  fields:\n"
                                "    total: {sum: {each: items, of: {product: [price, qty]}}}\n"
                                "    itemCount: {count: items}\n"
                                "    label: {concat: [first, {literal: \" \"}, last]}\n"
                                "    top: {max: {each: items, of: price}}\n"
                                "    avg: {divide: [sum, n]}\n"
                                "    deep: {min: [a.b.c, 2, -1.5, {literal: null}, {literal: true}]}\n"
                                "    byKeyOrder: {of: qty, each: items}\n"
                                "  on_client_write: reject\n");
  ASSERT_EQ(c.fields.size(), 7u);
  EXPECT_TRUE(c.aggregates.empty());
  EXPECT_EQ(c.on_client_write, ComputedRule::ClientWrite::kReject);
  EXPECT_EQ(c.fields[0].field, "total");
  // Paths inside `each` name fields of the element, not of the document.
  EXPECT_EQ(c.fields[0].inputs, (std::vector<std::string>{"items"}));
  const Expression& total = c.fields[0].expression;
  EXPECT_EQ(total.kind, Expression::Kind::kSum);
  ASSERT_EQ(total.operands.size(), 1u);
  EXPECT_EQ(total.operands[0].kind, Expression::Kind::kEach);
  EXPECT_EQ(total.operands[0].path, "items");
  ASSERT_EQ(total.operands[0].operands.size(), 1u);
  EXPECT_EQ(total.operands[0].operands[0].kind, Expression::Kind::kProduct);
  EXPECT_EQ(c.fields[1].expression.kind, Expression::Kind::kCount);
  EXPECT_EQ(c.fields[1].expression.path, "items");
  EXPECT_EQ(c.fields[2].inputs, (std::vector<std::string>{"first", "last"}));
  const Expression& space = c.fields[2].expression.operands.at(1);
  EXPECT_EQ(space.kind, Expression::Kind::kLiteral);
  EXPECT_EQ(space.literal, Expression::Literal(std::string(" ")));
  EXPECT_EQ(c.fields[3].expression.kind, Expression::Kind::kMax);
  EXPECT_EQ(c.fields[4].inputs, (std::vector<std::string>{"n", "sum"}));
  const Expression& deep = c.fields[5].expression;
  EXPECT_EQ(c.fields[5].inputs, (std::vector<std::string>{"a"}));
  ASSERT_EQ(deep.operands.size(), 5u);
  EXPECT_EQ(deep.operands[0].path, "a.b.c");
  EXPECT_EQ(deep.operands[1].literal, Expression::Literal(int64_t{2}));
  EXPECT_EQ(deep.operands[2].literal, Expression::Literal(-1.5));
  EXPECT_EQ(deep.operands[3].literal, Expression::Literal(std::monostate{}));
  EXPECT_EQ(deep.operands[4].literal, Expression::Literal(true));
  // A mapping's keys have no order: {of, each} is an each.
  EXPECT_EQ(c.fields[6].expression.kind, Expression::Kind::kEach);
  EXPECT_EQ(c.fields[6].inputs, (std::vector<std::string>{"items"}));
}

TEST(ComputedRuleLoader, Literals) {
  struct Case {
    const char* yaml;
    Expression::Literal literal;
  };
  for (const Case& c : {Case{"{literal: 5}", int64_t{5}}, Case{"{literal: 2.5}", 2.5},
                        Case{"{literal: \"5\"}", std::string("5")},
                        Case{"{literal: 'true'}", std::string("true")},
                        Case{"{literal: false}", false}, Case{"{literal: ~}", std::monostate{}},
                        Case{"{literal: }", std::monostate{}}, Case{"{literal: word}", std::string("word")},
                        Case{"7", int64_t{7}}, Case{"-7", int64_t{-7}}, Case{"1e3", 1000.0}}) {
    SCOPED_TRACE(c.yaml);
    ComputedRule rule = LoadComputed(WithExpression(c.yaml));
    ASSERT_EQ(rule.fields.size(), 1u);
    EXPECT_EQ(rule.fields[0].expression.kind, Expression::Kind::kLiteral);
    EXPECT_EQ(rule.fields[0].expression.literal, c.literal);
    EXPECT_TRUE(rule.fields[0].inputs.empty());
  }
  // Plain scalars that are not numbers are field paths: the words
  // from_chars would read as numbers (nan, inf, infinity). Quoted scalars
  // are field paths too. (A plain true is a boolean, refused: see
  // loader/computed/expression_a_boolean.)
  for (const char* path : {"\"true\"", "nan", "inf", "-Infinity", "\"7\"", "x1"}) {
    SCOPED_TRACE(path);
    ComputedRule rule = LoadComputed(WithExpression(path));
    ASSERT_EQ(rule.fields.size(), 1u);
    EXPECT_EQ(rule.fields[0].expression.kind, Expression::Kind::kField);
  }
}

// The loads that go with the refusals of loader/computed/.

TEST(ComputedRuleLoader, ExpressionNestedAtTheLimitLoads) {
  // 33 levels are refused: loader/computed/expression_nested_33_levels.
  std::string e = "a";
  for (int i = 0; i < 32; ++i) e = "{sum: " + e + "}";
  EXPECT_EQ(LoadComputed(WithExpression(e)).fields.size(), 1u);
}

TEST(ComputedRuleLoader, TargetOfTheSameNameInAnotherDatabaseLoads) {
  // Another database's collection of the same name is another collection.
  EXPECT_EQ(LoadComputed(kHead + "  aggregates:\n    - target: archive.comments\n"
                                 "      link: postId\n      fields: {n: count}\n")
                .aggregates.size(),
            1u);
}

TEST(ComputedRuleLoader, LatestKeyOrderAndItsMaxAfterIt) {
  // Key order does not matter, and the max may come after.
  ComputedRule c = LoadComputed(WithMaintained("        last: {by: at, latest: author}\n"
                                               "        lastAt: {max: at}\n"));
  ASSERT_EQ(c.aggregates.size(), 1u);
  ASSERT_EQ(c.aggregates[0].fields.size(), 2u);
  EXPECT_EQ(c.aggregates[0].fields[0].op, MaintainedField::Op::kLatest);
  EXPECT_EQ(c.aggregates[0].fields[0].of, "author");
  EXPECT_EQ(c.aggregates[0].fields[0].by, "at");
  EXPECT_EQ(c.aggregates[0].fields[0].by_field, "lastAt");
}

TEST(ComputedRuleLoader, DerivedFieldsReadMaintainedFields) {
  const std::string base = WithMaintained("        n: count\n        s: {sum: stars}\n");
  // Several of them, and through a dotted path of one.
  EXPECT_EQ(LoadComputed(base + "      derived:\n        avg: {divide: [s, n]}\n"
                                "        t: {max: [s, n, 0]}\n        u: {max: [s.x, 1]}\n")
                .aggregates.at(0)
                .derived.size(),
            3u);
}

TEST(ComputedRuleLoader, TwoAggregatesOfOneTargetWithOtherFieldsLoad) {
  // The same field of one target is refused:
  // loader/computed/two_aggregates_maintain_one_field.
  const std::string list = kHead + "  aggregates:\n";
  // Different fields of one target: fine.
  EXPECT_EQ(LoadComputed(list + "    - {target: posts, link: postId, fields: {n: count}}\n"
                                "    - {target: blog.posts, link: replyTo, fields: {r: count}}\n")
                .aggregates.size(),
            2u);
  // The same field name in different targets: fine.
  EXPECT_EQ(LoadComputed(list + "    - {target: posts, link: postId, fields: {n: count}}\n"
                                "    - {target: other.posts, link: postId, fields: {n: count}}\n")
                .aggregates.size(),
            2u);
}

TEST(ComputedRuleLoader, PathsInsideEachNameTheElementsFields) {
  // Inside each, paths name the element's fields: `total` of an item is not
  // the computed field `total`.
  EXPECT_EQ(
      LoadComputed(kHead + "  fields:\n    total: {sum: {each: items, of: total}}\n").fields.size(),
      1u);
}

}  // namespace
}  // namespace remold
