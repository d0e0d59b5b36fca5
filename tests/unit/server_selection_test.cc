// Server selection over a TopologyView, read preferences validated as
// mongos does, and request routes (proxy/routing/server_selection.h,
// proxy/routing/request_route.h).
#include "proxy/routing/server_selection.h"

#include <gtest/gtest.h>

#include <set>

#include "common/doc.h"
#include "proxy/routing/request_route.h"
#include "tests/unit/test_util.h"

namespace remold {
namespace {

using Mode = ReadPreference::Mode;
using std::chrono::milliseconds;

Doc Json(std::string_view json) {
  std::string error;
  std::optional<Doc> doc = Doc::FromJson(json, &error);
  EXPECT_TRUE(doc) << error;
  return doc ? *doc : Doc();
}

std::variant<ReadPreference, SelectionError> Parse(std::string_view json,
                                                   milliseconds heartbeat = milliseconds(10'000)) {
  Doc doc = Json(std::string("{\"$readPreference\": ") + std::string(json) + "}");
  bson_iter_t it;
  EXPECT_TRUE(bson_iter_init_find(&it, doc.get(), "$readPreference"));
  return ParseReadPreference(it, heartbeat);
}

int32_t ErrorCodeOf(const std::variant<ReadPreference, SelectionError>& parsed) {
  const auto* error = std::get_if<SelectionError>(&parsed);
  return error ? error->code.value : 0;
}

TEST(ReadPreferenceTest, ParsesEveryMode) {
  for (auto [name, mode] : {std::pair{"primary", Mode::kPrimary}, {"primaryPreferred", Mode::kPrimaryPreferred},
                            {"secondary", Mode::kSecondary}, {"secondaryPreferred", Mode::kSecondaryPreferred},
                            {"nearest", Mode::kNearest}}) {
    auto parsed = Parse(std::string("{\"mode\": \"") + name + "\"}");
    ASSERT_TRUE(std::holds_alternative<ReadPreference>(parsed)) << name;
    EXPECT_EQ(std::get<ReadPreference>(parsed).mode, mode);
    EXPECT_EQ(ReadPreferenceModeName(mode), name);
  }
}

TEST(ReadPreferenceTest, ParsesTagsStalenessAndHedge) {
  auto parsed = Parse(R"({"mode": "nearest", "tags": [{"dc": "east", "rack": "1"}, {}],
                          "maxStalenessSeconds": 120, "hedge": {"enabled": true}})");
  ASSERT_TRUE(std::holds_alternative<ReadPreference>(parsed));
  const ReadPreference& preference = std::get<ReadPreference>(parsed);
  ASSERT_EQ(preference.tag_sets.size(), 2u);
  EXPECT_EQ(preference.tag_sets[0].size(), 2u);
  EXPECT_TRUE(preference.tag_sets[1].empty());
  EXPECT_EQ(preference.max_staleness, std::chrono::seconds(120));
  EXPECT_TRUE(preference.hedge);
}

TEST(ReadPreferenceTest, RefusesWhatMongosRefuses) {
  EXPECT_EQ(ErrorCodeOf(Parse(R"({"mode": "fastest"})")), 9);
  EXPECT_EQ(ErrorCodeOf(Parse(R"({"tags": []})")), 9);  // no mode
  EXPECT_EQ(ErrorCodeOf(Parse(R"({"mode": "secondary", "maxStalenessSeconds": 30})")), 160);
  EXPECT_EQ(ErrorCodeOf(Parse(R"({"mode": "secondary", "maxStalenessSeconds": 89})")), 160);
  EXPECT_EQ(ErrorCodeOf(Parse(R"({"mode": "secondary", "maxStalenessSeconds": 90})")), 0);
  EXPECT_EQ(ErrorCodeOf(Parse(R"({"mode": "secondary", "maxStalenessSeconds": -5})")), 2);
  EXPECT_EQ(ErrorCodeOf(Parse(R"({"mode": "secondary", "maxStalenessSeconds": "a"})")), 14);
  EXPECT_EQ(ErrorCodeOf(Parse(R"({"mode": "primary", "maxStalenessSeconds": 120})")), 2);
  EXPECT_EQ(ErrorCodeOf(Parse(R"({"mode": "primary", "tags": [{"dc": "east"}]})")), 2);
  EXPECT_EQ(ErrorCodeOf(Parse(R"({"mode": "primary", "tags": [{}]})")), 0);
  EXPECT_EQ(ErrorCodeOf(Parse(R"({"mode": "primary", "hedge": {"enabled": true}})")), 2);
  EXPECT_EQ(ErrorCodeOf(Parse(R"({"mode": "secondary", "tags": [{"dc": 1}]})")), 14);
  EXPECT_EQ(ErrorCodeOf(Parse(R"("secondary")")), 14);
  // The floor grows with the monitor's heartbeat: heartbeat + 10 s idle writes.
  EXPECT_EQ(ErrorCodeOf(Parse(R"({"mode": "secondary", "maxStalenessSeconds": 100})", milliseconds(95'000))), 160);
  EXPECT_EQ(ErrorCodeOf(Parse(R"({"mode": "secondary", "maxStalenessSeconds": 105})", milliseconds(95'000))), 0);
}

Member MakeMember(std::string address, MemberKind kind, int rtt_ms = 5,
                  std::vector<std::pair<std::string, std::string>> tags = {}) {
  Member member;
  member.address = std::move(address);
  member.kind = kind;
  member.round_trip = milliseconds(rtt_ms);
  member.tags = std::move(tags);
  member.last_update_us = 1'000'000'000;
  member.last_write_ms = 1'000'000;
  return member;
}

TopologyView ReplicaSet(std::vector<Member> members) {
  TopologyView view;
  view.members = std::move(members);
  view.kind = view.primary() ? TopologyKind::kReplicaSetWithPrimary : TopologyKind::kReplicaSetNoPrimary;
  view.scanned = true;
  return view;
}

ReadPreference Preference(Mode mode, std::vector<ReadPreference::TagSet> tags = {},
                          std::optional<int> staleness = std::nullopt) {
  ReadPreference preference;
  preference.mode = mode;
  preference.tag_sets = std::move(tags);
  if (staleness) preference.max_staleness = std::chrono::seconds(*staleness);
  return preference;
}

std::string Selected(const TopologyView& view, const ReadPreference& preference, uint32_t random = 0) {
  const Member* member = SelectForRead(view, preference, random);
  return member ? member->address : "none";
}

TEST(ServerSelectionTest, ReplicaSetModes) {
  TopologyView view = ReplicaSet({MakeMember("p:1", MemberKind::kPrimary), MakeMember("s:1", MemberKind::kSecondary),
                                  MakeMember("a:1", MemberKind::kOther)});
  EXPECT_EQ(Selected(view, Preference(Mode::kPrimary)), "p:1");
  EXPECT_EQ(Selected(view, Preference(Mode::kPrimaryPreferred)), "p:1");
  EXPECT_EQ(Selected(view, Preference(Mode::kSecondary)), "s:1");
  EXPECT_EQ(Selected(view, Preference(Mode::kSecondaryPreferred)), "s:1");
  EXPECT_EQ(SelectForWrite(view, 7)->address, "p:1");

  TopologyView no_secondary = ReplicaSet({MakeMember("p:1", MemberKind::kPrimary)});
  EXPECT_EQ(Selected(no_secondary, Preference(Mode::kSecondary)), "none");
  EXPECT_EQ(Selected(no_secondary, Preference(Mode::kSecondaryPreferred)), "p:1");

  TopologyView no_primary = ReplicaSet({MakeMember("s:1", MemberKind::kSecondary), MakeMember("u:1", MemberKind::kUnknown)});
  EXPECT_EQ(Selected(no_primary, Preference(Mode::kPrimary)), "none");
  EXPECT_EQ(Selected(no_primary, Preference(Mode::kPrimaryPreferred)), "s:1");
  EXPECT_EQ(SelectForWrite(no_primary, 0), nullptr);
}

TEST(ServerSelectionTest, NearestKeepsTheLatencyWindow) {
  TopologyView view = ReplicaSet({MakeMember("p:1", MemberKind::kPrimary, 40), MakeMember("s:1", MemberKind::kSecondary, 5),
                                  MakeMember("s:2", MemberKind::kSecondary, 19), MakeMember("s:3", MemberKind::kSecondary, 21)});
  std::set<std::string> chosen;
  for (uint32_t random = 0; random < 16; ++random) chosen.insert(Selected(view, Preference(Mode::kNearest), random));
  EXPECT_EQ(chosen, (std::set<std::string>{"s:1", "s:2"}));  // 5 ms + 15 ms
}

TEST(ServerSelectionTest, TagSetsInOrderOfPreference) {
  TopologyView view = ReplicaSet({MakeMember("p:1", MemberKind::kPrimary, 5, {{"dc", "east"}}),
                                  MakeMember("s:1", MemberKind::kSecondary, 5, {{"dc", "west"}, {"rack", "1"}}),
                                  MakeMember("s:2", MemberKind::kSecondary, 5, {{"dc", "east"}})});
  EXPECT_EQ(Selected(view, Preference(Mode::kSecondary, {{{"dc", "west"}}})), "s:1");
  EXPECT_EQ(Selected(view, Preference(Mode::kSecondary, {{{"dc", "north"}}, {{"dc", "east"}}})), "s:2");
  EXPECT_EQ(Selected(view, Preference(Mode::kSecondary, {{{"dc", "north"}}})), "none");
  EXPECT_EQ(Selected(view, Preference(Mode::kSecondaryPreferred, {{{"dc", "north"}}})), "p:1");
  EXPECT_EQ(Selected(view, Preference(Mode::kSecondary, {{{"dc", "west"}, {"rack", "2"}}})), "none");
  EXPECT_EQ(Selected(view, Preference(Mode::kSecondary, {{{"dc", "north"}}, {}})), "s:1");  // {} matches all
  std::set<std::string> east;
  for (uint32_t random = 0; random < 8; ++random)
    east.insert(Selected(view, Preference(Mode::kNearest, {{{"dc", "east"}}}), random));
  EXPECT_EQ(east, (std::set<std::string>{"p:1", "s:2"}));
}

TEST(ServerSelectionTest, MaxStalenessDropsLaggingSecondaries) {
  Member primary = MakeMember("p:1", MemberKind::kPrimary);
  Member fresh = MakeMember("s:1", MemberKind::kSecondary);
  Member stale = MakeMember("s:2", MemberKind::kSecondary);
  fresh.last_write_ms -= 2'000;
  stale.last_write_ms -= 200'000;
  TopologyView view = ReplicaSet({primary, fresh, stale});
  view.heartbeat = milliseconds(10'000);
  EXPECT_EQ(EstimatedStalenessMs(view, *view.Find("s:1")), 12'000);
  EXPECT_EQ(EstimatedStalenessMs(view, *view.Find("s:2")), 210'000);
  EXPECT_EQ(EstimatedStalenessMs(view, *view.Find("p:1")), 0);
  for (uint32_t random = 0; random < 8; ++random)
    EXPECT_EQ(Selected(view, Preference(Mode::kSecondary, {}, 90), random), "s:1");
  std::set<std::string> any;
  for (uint32_t random = 0; random < 8; ++random) any.insert(Selected(view, Preference(Mode::kSecondary), random));
  EXPECT_EQ(any.size(), 2u);

  // Without a primary, against the freshest secondary.
  TopologyView headless = ReplicaSet({fresh, stale});
  EXPECT_EQ(EstimatedStalenessMs(headless, *headless.Find("s:1")), 10'000);
  EXPECT_EQ(Selected(headless, Preference(Mode::kSecondary, {}, 90)), "s:1");
}

TEST(ServerSelectionTest, SingleAndSharded) {
  TopologyView single;
  single.kind = TopologyKind::kSingle;
  single.members = {MakeMember("db:1", MemberKind::kStandalone)};
  EXPECT_EQ(Selected(single, Preference(Mode::kSecondary)), "db:1");
  EXPECT_EQ(SelectForWrite(single, 0)->address, "db:1");

  TopologyView sharded;
  sharded.kind = TopologyKind::kSharded;
  sharded.members = {MakeMember("m:1", MemberKind::kMongos, 2), MakeMember("m:2", MemberKind::kMongos, 3),
                     MakeMember("m:3", MemberKind::kUnknown, 1)};
  std::set<std::string> chosen;
  for (uint32_t random = 0; random < 8; ++random) chosen.insert(SelectForWrite(sharded, random)->address);
  EXPECT_EQ(chosen, (std::set<std::string>{"m:1", "m:2"}));
}

wire::Request RequestFor(const Doc& body, std::string command) {
  return testing::MsgRequest(body.bytes(), std::move(command));
}

RequestRoute RouteFor(std::string_view json) {
  Doc body = Json(json);
  bson_iter_t first;
  bson_iter_init(&first, body.get());
  bson_iter_next(&first);
  auto route = RouteOf(RequestFor(body, bson_iter_key(&first)), milliseconds(10'000));
  EXPECT_TRUE(std::holds_alternative<RequestRoute>(route));
  return std::holds_alternative<RequestRoute>(route) ? std::get<RequestRoute>(route) : RequestRoute{};
}

TEST(RequestRouteTest, ReadsFollowTheirPreferenceWritesThePrimary) {
  using Kind = RequestRoute::Kind;
  EXPECT_EQ(RouteFor(R"({"find": "c", "$db": "d"})").kind, Kind::kPrimary);
  RequestRoute read = RouteFor(R"({"find": "c", "$readPreference": {"mode": "secondary"}, "$db": "d"})");
  EXPECT_EQ(read.kind, Kind::kRead);
  EXPECT_EQ(read.preference.mode, Mode::kSecondary);
  EXPECT_TRUE(read.may_open_cursor);
  EXPECT_EQ(RouteFor(R"({"insert": "c", "$readPreference": {"mode": "secondary"}, "$db": "d"})").kind, Kind::kPrimary);
  EXPECT_EQ(RouteFor(R"({"aggregate": "c", "pipeline": [{"$match": {}}, {"$out": "o"}],
                          "$readPreference": {"mode": "secondary"}, "$db": "d"})").kind, Kind::kPrimary);
  EXPECT_EQ(RouteFor(R"({"aggregate": "c", "pipeline": [{"$match": {}}],
                          "$readPreference": {"mode": "nearest"}, "$db": "d"})").kind, Kind::kRead);
  EXPECT_EQ(RouteFor(R"({"createUser": "u", "$readPreference": {"mode": "secondary"}, "$db": "d"})").kind,
            Kind::kPrimary);
  EXPECT_EQ(RouteFor(R"({"find": "c", "$readPreference": {"mode": "primary"}, "$db": "d"})").kind, Kind::kPrimary);
}

TEST(RequestRouteTest, CursorsAndTransactions) {
  RequestRoute more = RouteFor(R"({"getMore": {"$numberLong": "1234567890123"}, "collection": "c", "$db": "d"})");
  EXPECT_EQ(more.kind, RequestRoute::Kind::kCursor);
  EXPECT_EQ(more.cursor_id, 1234567890123);
  RequestRoute kill = RouteFor(R"({"killCursors": "c", "cursors": [{"$numberLong": "77"}], "$db": "d"})");
  EXPECT_EQ(kill.kind, RequestRoute::Kind::kCursor);
  EXPECT_EQ(kill.cursor_id, 77);

  RequestRoute start = RouteFor(R"({"find": "c", "lsid": {"id": 1}, "txnNumber": 1, "startTransaction": true,
                                    "autocommit": false, "$readPreference": {"mode": "secondary"}, "$db": "d"})");
  EXPECT_TRUE(start.starts_transaction);
  EXPECT_FALSE(start.transaction.empty());
  EXPECT_EQ(start.kind, RequestRoute::Kind::kPrimary);  // a transaction reads from its primary
  RequestRoute next = RouteFor(R"({"insert": "c", "lsid": {"id": 1}, "txnNumber": 1, "autocommit": false, "$db": "d"})");
  EXPECT_EQ(next.transaction, start.transaction);
  EXPECT_FALSE(next.starts_transaction);
  EXPECT_TRUE(RouteFor(R"({"insert": "c", "lsid": {"id": 1}, "$db": "d"})").transaction.empty());
}

TEST(RequestRouteTest, AuthenticationConversations) {
  EXPECT_TRUE(RouteFor(R"({"saslStart": 1, "mechanism": "SCRAM-SHA-256", "$db": "admin"})").authenticates);
  EXPECT_TRUE(RouteFor(R"({"saslContinue": 1, "conversationId": 1, "$db": "admin"})").authenticates);
  EXPECT_FALSE(RouteFor(R"({"find": "c", "$db": "d"})").authenticates);
  Doc hello = Json(R"({"hello": 1, "speculativeAuthenticate": {"saslStart": 1}, "$db": "admin"})");
  wire::Request handshake = RequestFor(hello, "hello");
  handshake.is_handshake = true;
  EXPECT_TRUE(IsAuthentication(handshake));
  Doc plain = Json(R"({"hello": 1, "$db": "admin"})");
  wire::Request plain_handshake = RequestFor(plain, "hello");
  plain_handshake.is_handshake = true;
  EXPECT_FALSE(IsAuthentication(plain_handshake));
}

TEST(RequestRouteTest, InvalidPreferenceIsRefused) {
  Doc body = Json(R"({"find": "c", "$readPreference": {"mode": "secondary", "maxStalenessSeconds": 10}, "$db": "d"})");
  auto route = RouteOf(RequestFor(body, "find"), milliseconds(10'000));
  ASSERT_TRUE(std::holds_alternative<SelectionError>(route));
  EXPECT_EQ(std::get<SelectionError>(route).code.value, 160);
}

TEST(RequestRouteTest, ReplyCursorIdAndNotPrimaryCodes) {
  EXPECT_EQ(ReplyCursorId(Json(R"({"cursor": {"id": {"$numberLong": "42"}, "firstBatch": []}, "ok": 1})").bytes()), 42);
  EXPECT_EQ(ReplyCursorId(Json(R"({"cursor": {"id": {"$numberLong": "0"}, "firstBatch": []}, "ok": 1})").bytes()), 0);
  EXPECT_EQ(ReplyCursorId(Json(R"({"ok": 1})").bytes()), 0);
  EXPECT_TRUE(IsNotPrimaryCode(10107));
  EXPECT_TRUE(IsNotPrimaryCode(11602));
  EXPECT_FALSE(IsNotPrimaryCode(11000));
}

}  // namespace
}  // namespace remold
