// Which client commands go to the rewrite engine (proxy/rewrite_bridge.h,
// CommandForRules). Its first filter reads only the command's first value;
// every command here must get the answer the full reading gives: the
// namespace (rewrite/command_namespace.h), then the rule set's lookup, or
// a command that may concern rules elsewhere.
#include "proxy/rewrite_bridge.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/engine.h"
#include "proxy/wire/op_msg.h"
#include "proxy/wire/request.h"
#include "rewrite/command_namespace.h"
#include "tests/unit/rule_texts.h"

namespace remold {
namespace {

std::shared_ptr<const RuleSet> Rules() {
  return testing::RulesFromTexts(
      {{"readings.yaml", "namespace: iot.readings\npattern: bucket\nbucket:\n  collection: readings_buckets\n"
                         "  meta: [sensor]\n  time: at\n  span: 1h\n  summaries:\n    temp: [sum]\n"},
       {"orders.yaml", "namespace: shop.orders\npattern: extended_reference\nextended_reference:\n"
                       "  reference: customerId\n  referenced: customers\n  into: customer\n"
                       "  fields: [name]\n  mode: synced\n  missing: error\n"}});
}

// What CommandForRules must answer: the full reading of the command.
bool ConcernsRules(std::string_view command, const bson_t* body, const RuleSet& rules) {
  std::optional<CommandNamespace> ns = ResolveNamespace(command, body);
  if (!ns) return false;
  return (ns->collection && rules.FindForCommand(ns->db, *ns->collection)) || MayConcernRulesElsewhere(command);
}

TEST(CommandForRulesTest, FirstValueFilterAgreesWithTheFullReading) {
  const std::shared_ptr<const RuleSet> rules = Rules();
  const std::vector<std::string> commands = {
      "find", "insert", "update", "delete", "count", "distinct", "findAndModify", "aggregate",
      "createIndexes", "listIndexes", "drop", "collStats", "dataSize", "getMore", "create", "mapReduce",
      "renameCollection", "listCollections", "createUser", "explain", "ping", "unknownCommand"};
  const std::vector<std::string> values = {
      R"("readings")", R"("readings_buckets")", R"("orders")", R"("customers")", R"("other")",
      R"("iot.readings")", R"(1)", R"({"$binary": {"base64": "AAAAAAAAAAAAAAAAAAAAAA==", "subType": "04"}})"};
  const std::vector<std::string> databases = {"iot", "shop", "other"};
  int concerned = 0;
  int checked = 0;
  for (const std::string& command : commands) {
    for (const std::string& value : values) {
      for (const std::string& db : databases) {
        for (const char* collection_field : {"", R"(, "collection": "readings")"}) {
          const std::string json = "{\"" + command + "\": " + value + collection_field + ", \"$db\": \"" + db + "\"}";
          std::optional<Doc> body = Doc::FromJson(json);
          ASSERT_TRUE(body) << json;
          std::vector<uint8_t> message = wire::EncodeOpMsg(7, 0, 0, body->bytes());
          wire::Request request;
          ASSERT_FALSE(wire::DecodeRequest(message, request)) << json;
          const bool expected = ConcernsRules(command, body->get(), *rules);
          EXPECT_EQ(CommandForRules(request, *rules).has_value(), expected) << json;
          concerned += expected;
          ++checked;
        }
      }
    }
  }
  // Both answers are exercised, many times.
  EXPECT_GT(concerned, 50);
  EXPECT_GT(checked - concerned, 50);
}

TEST(RuleSetTest, MayConcernNamesLogicalAndWatchedCollectionsInAnyDatabase) {
  const std::shared_ptr<const RuleSet> rules = Rules();
  EXPECT_TRUE(rules->MayConcern("readings"));
  EXPECT_TRUE(rules->MayConcern("orders"));
  EXPECT_TRUE(rules->MayConcern("customers"));  // watched by the orders rule
  EXPECT_FALSE(rules->MayConcern("readings_buckets"));
  EXPECT_FALSE(rules->MayConcern("other"));
  EXPECT_FALSE(rules->MayConcern(std::string_view("readings\0x", 10)));
  EXPECT_FALSE(RuleSet().MayConcern("readings"));
}

}  // namespace
}  // namespace remold
