// The cluster commands remold answers as a mongos (proxy/routing/mongos_persona.h).
#include "proxy/routing/mongos_persona.h"

#include <gtest/gtest.h>

#include "tests/unit/test_util.h"

namespace remold {
namespace {

Doc Json(std::string_view json) { return *Doc::FromJson(json); }

wire::Request RequestFor(const Doc& body, std::string command) {
  return testing::MsgRequest(body.bytes(), std::move(command));
}

Member At(std::string address) {
  Member member;
  member.address = std::move(address);
  return member;
}

TopologyView ThreeMembers(TopologyKind kind) {
  TopologyView view;
  view.kind = kind;
  view.set_name = "rs0";
  for (const char* address : {"a:1", "b:2", "c:3"}) view.members.push_back(At(address));
  return view;
}

BackendOptions Backend() {
  BackendOptions backend;
  backend.hosts = {HostAndPort{"db.internal", 27017}};
  return backend;
}

TEST(MongosPersonaTest, ListShardsNamesTheReplicaSet) {
  Doc body = Json(R"({"listShards": 1, "$db": "admin"})");
  TopologyView view = ThreeMembers(TopologyKind::kReplicaSetWithPrimary);
  std::optional<Doc> reply = AnswerAsMongos(RequestFor(body, "listShards"), &view, Backend());
  ASSERT_TRUE(reply);
  EXPECT_EQ(*reply, Json(R"({"shards": [{"_id": "rs0", "host": "rs0/a:1,b:2,c:3", "state": 1}], "ok": 1.0})"));
}

TEST(MongosPersonaTest, StandaloneAndDirectBackends) {
  Doc body = Json(R"({"listShards": 1, "$db": "admin"})");
  TopologyView single;
  single.kind = TopologyKind::kSingle;
  single.members.push_back(At("db:27017"));
  EXPECT_EQ(*AnswerAsMongos(RequestFor(body, "listShards"), &single, Backend()),
            Json(R"({"shards": [{"_id": "shard0", "host": "db:27017", "state": 1}], "ok": 1.0})"));
  EXPECT_EQ(*AnswerAsMongos(RequestFor(body, "listShards"), nullptr, Backend()),
            Json(R"({"shards": [{"_id": "shard0", "host": "db.internal:27017", "state": 1}], "ok": 1.0})"));
}

TEST(MongosPersonaTest, ConfigShardsAndIsdbgrid) {
  TopologyView view = ThreeMembers(TopologyKind::kReplicaSetNoPrimary);
  Doc find = Json(R"({"find": "shards", "filter": {}, "$db": "config"})");
  std::optional<Doc> reply = AnswerAsMongos(RequestFor(find, "find"), &view, Backend());
  ASSERT_TRUE(reply);
  EXPECT_EQ(*reply, Json(R"({"cursor": {"id": {"$numberLong": "0"}, "ns": "config.shards",
                               "firstBatch": [{"_id": "rs0", "host": "rs0/a:1,b:2,c:3", "state": 1}]}, "ok": 1.0})"));
  Doc grid = Json(R"({"isdbgrid": 1, "$db": "admin"})");
  EXPECT_EQ(FindInteger(AnswerAsMongos(RequestFor(grid, "isdbgrid"), &view, Backend())->get(), "isdbgrid"), 1);
}

TEST(MongosPersonaTest, EverythingElseGoesThrough) {
  TopologyView view = ThreeMembers(TopologyKind::kReplicaSetWithPrimary);
  Doc other_find = Json(R"({"find": "shards", "filter": {}, "$db": "app"})");
  EXPECT_FALSE(AnswerAsMongos(RequestFor(other_find, "find"), &view, Backend()));
  Doc plain = Json(R"({"find": "c", "filter": {}, "$db": "config"})");
  EXPECT_FALSE(AnswerAsMongos(RequestFor(plain, "find"), &view, Backend()));
  TopologyView sharded = ThreeMembers(TopologyKind::kSharded);
  Doc list = Json(R"({"listShards": 1, "$db": "admin"})");
  EXPECT_FALSE(AnswerAsMongos(RequestFor(list, "listShards"), &sharded, Backend()));
  Doc elsewhere = Json(R"({"listShards": 1, "$db": "app"})");
  EXPECT_EQ(FindInteger(AnswerAsMongos(RequestFor(elsewhere, "listShards"), &view, Backend())->get(), "code"), 13);
}

}  // namespace
}  // namespace remold
