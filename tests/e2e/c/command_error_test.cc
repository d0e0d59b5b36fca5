// Command errors through remold keep MongoDB's shape ({ok: 0, errmsg, code,
// codeName}) and the backend's own code and codeName: each failing command
// is sent through the server under test and straight to the backend, and
// the two replies must agree. Unacknowledged (w:0) writes get no reply, and
// the connection stays in step for the next command.

#include <chrono>
#include <thread>

#include "driver.h"

namespace e2e {
namespace {

struct CommandError {
  bool failed = false;
  uint32_t code = 0;
  std::optional<std::string> code_name;
  bool has_errmsg = false;
  bool operator==(const CommandError&) const = default;
};

std::ostream& operator<<(std::ostream& out, const CommandError& error) {
  return out << "{failed: " << error.failed << ", code: " << error.code
             << ", codeName: " << error.code_name.value_or("<none>") << ", errmsg: " << error.has_errmsg << "}";
}

CommandError RunFailing(mongoc_client_t* client, const std::string& db_name, const Bson& command) {
  Bson reply;
  bson_error_t error;
  CommandError result;
  result.failed = !mongoc_client_command_simple(client, db_name.c_str(), command.get(), nullptr, reply.out(), &error);
  result.code = result.failed ? error.code : 0;
  result.code_name = reply.Str("codeName");
  result.has_errmsg = reply.Str("errmsg").has_value() && !reply.Str("errmsg")->empty();
  return result;
}

using CommandErrorTest = DriverTest;

TEST_F(CommandErrorTest, ErrorsMatchTheBackend) {
  ClientPtr direct = NewClient(BackendUri().get());
  ASSERT_TRUE(direct);
  const std::string direct_db = TestDatabaseName("_direct");
  for (mongoc_client_t* target : {client(), direct.get()}) {
    CollectionPtr coll(mongoc_client_get_collection(target, target == client() ? db_name().c_str() : direct_db.c_str(), "c"));
    InsertAll(coll.get(), {Json(R"({"_id": 1})")});
  }
  const char* commands[] = {
      R"({"remoldNoSuchCommand": 1})",
      R"({"getMore": {"$numberLong": "1234567"}, "collection": "c"})",
      R"({"find": "c", "filter": {"$remoldNoSuchOperator": 1}})",
      R"({"count": "c", "query": {"a": {"$remoldNoSuchOperator": 1}}})",
      R"({"aggregate": "c", "pipeline": [{"$remoldNoSuchStage": {}}], "cursor": {}})",
  };
  for (const char* text : commands) {
    Bson command = Json(text);
    CommandError through_server = RunFailing(client(), db_name(), command);
    CommandError from_backend = RunFailing(direct.get(), direct_db, command);
    EXPECT_TRUE(through_server.failed) << text;
    EXPECT_NE(through_server.code, 0u) << text;
    EXPECT_TRUE(through_server.has_errmsg) << text;
    EXPECT_EQ(through_server, from_backend) << text;
  }
  mongoc_database_t* direct_database = mongoc_client_get_database(direct.get(), direct_db.c_str());
  bson_error_t error;
  EXPECT_TRUE(mongoc_database_drop_with_opts(direct_database, nullptr, &error)) << error.message;
  mongoc_database_destroy(direct_database);
  EXPECT_EQ(RunFailing(client(), db_name(), Json(R"({"getMore": {"$numberLong": "1234567"}, "collection": "c"})")).code, 43u)
      << "an unknown cursor is CursorNotFound";
}

// Whether the backend keeps a connection usable after a w:0 write.
bool BackendSupportsUnacknowledgedWrites(const std::string& db_name) {
  ClientPtr direct = NewClient(BackendUri().get());
  CollectionPtr coll(mongoc_client_get_collection(direct.get(), db_name.c_str(), "probe"));
  Bson unacknowledged = Json(R"({"writeConcern": {"w": 0}})");
  bson_error_t error;
  Bson reply;
  bool usable = mongoc_collection_insert_one(coll.get(), Json("{}").get(), unacknowledged.get(), nullptr, &error) &&
                mongoc_client_command_simple(direct.get(), db_name.c_str(), Json(R"({"ping": 1})").get(), nullptr,
                                             reply.out(), &error);
  mongoc_database_t* db = mongoc_client_get_database(direct.get(), db_name.c_str());
  mongoc_database_drop_with_opts(db, nullptr, &error);
  mongoc_database_destroy(db);
  return usable;
}

TEST_F(CommandErrorTest, UnacknowledgedWritesGetNoReply) {
  if (!BackendSupportsUnacknowledgedWrites(TestDatabaseName("_probe"))) {
    GTEST_SKIP() << "the backend drops the connection after a w:0 (moreToCome) write";
  }
  CollectionPtr coll = Collection();
  Bson unacknowledged = Json(R"({"writeConcern": {"w": 0}})");
  bson_error_t error;
  constexpr int kWrites = 50;
  for (int i = 0; i < kWrites; ++i) {
    ASSERT_TRUE(mongoc_collection_insert_one(coll.get(), Bson().Add("_id", i).get(), unacknowledged.get(), nullptr,
                                             &error))
        << error.message;
  }
  // A stray reply to any of those would be taken as the reply to this ping.
  std::optional<Bson> pong = RunCommand(Json(R"({"ping": 1})"), &error);
  ASSERT_TRUE(pong) << error.message;
  EXPECT_EQ(pong->Int("ok"), 1);
  EXPECT_FALSE(pong->Has("n")) << pong->Json();

  // The writes land (on one connection MongoDB applies them in order).
  int64_t count = -1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (count != kWrites && std::chrono::steady_clock::now() < deadline) {
    count = mongoc_collection_count_documents(coll.get(), Json("{}").get(), nullptr, nullptr, nullptr, &error);
    if (count != kWrites) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(count, kWrites) << error.message;
}

}  // namespace
}  // namespace e2e
