// Duplicate-key errors through remold: with a unique index, ordered and
// unordered bulk inserts (and a raw insert command) containing duplicates.
// The writeErrors (index, code) and the stored documents must be MongoDB's,
// and the replies exactly what the same operations return when sent straight
// to the backend. (The reported count is compared with the backend only: the
// stand-in backend miscounts `n` when writes fail.)

#include <ostream>

#include "driver.h"

namespace e2e {
namespace {

using WriteErrors = std::vector<std::pair<int64_t, int64_t>>;  // (index, code)

// The parts of a write that remold must preserve, and what was stored.
struct WriteOutcome {
  int64_t inserted = -1;
  WriteErrors errors;
  std::vector<int64_t> stored_ids;

  bool operator==(const WriteOutcome&) const = default;
  friend std::ostream& operator<<(std::ostream& out, const WriteOutcome& outcome) {
    out << "{inserted: " << outcome.inserted << ", writeErrors: [";
    for (const auto& [index, code] : outcome.errors) out << "{index: " << index << ", code: " << code << "} ";
    out << "], stored _ids: [";
    for (int64_t id : outcome.stored_ids) out << id << " ";
    return out << "]}";
  }
};

WriteOutcome OutcomeOf(mongoc_collection_t* coll, const Bson& reply, const char* count_field) {
  WriteOutcome outcome;
  outcome.inserted = reply.Int(count_field).value_or(-1);
  for (const Bson& error : reply.DocArray("writeErrors")) {
    outcome.errors.emplace_back(error.Int("index").value_or(-1), error.Int("code").value_or(-1));
  }
  CursorPtr cursor(mongoc_collection_find_with_opts(coll, Json("{}").get(), Json(R"({"sort": {"_id": 1}})").get(), nullptr));
  for (const Bson& doc : Drain(cursor.get())) outcome.stored_ids.push_back(doc.Int("_id").value_or(-1));
  return outcome;
}

// k values 1, 2, 1, 3, 2, 4: statements 2 and 4 repeat a unique key.
std::vector<Bson> DocsWithDuplicates() {
  std::vector<Bson> docs;
  const int keys[] = {1, 2, 1, 3, 2, 4};
  for (int i = 0; i < 6; ++i) docs.push_back(Bson().Add("_id", i).Add("k", keys[i]));
  return docs;
}

struct Outcomes {
  WriteOutcome ordered_bulk;
  WriteOutcome unordered_bulk;
  WriteOutcome raw_unordered_insert;
};

class Scenario {
 public:
  Scenario(mongoc_client_t* client, std::string db_name) : client_(client), db_name_(std::move(db_name)) {}

  Outcomes Run() {
    Outcomes outcomes;
    outcomes.ordered_bulk = Bulk("ordered", true);
    outcomes.unordered_bulk = Bulk("unordered", false);
    outcomes.raw_unordered_insert = RawInsert("raw");
    return outcomes;
  }

  void Drop() {
    mongoc_database_t* db = mongoc_client_get_database(client_, db_name_.c_str());
    bson_error_t error;
    EXPECT_TRUE(mongoc_database_drop_with_opts(db, nullptr, &error)) << error.message;
    mongoc_database_destroy(db);
  }

 private:
  CollectionPtr UniqueCollection(const char* name) {
    CollectionPtr coll(mongoc_client_get_collection(client_, db_name_.c_str(), name));
    Bson reply;
    bson_error_t error;
    Bson command = Bson().Add("createIndexes", name).AddArray(
        "indexes", {Json(R"({"key": {"k": 1}, "name": "k_1", "unique": true})")});
    EXPECT_TRUE(mongoc_collection_write_command_with_opts(coll.get(), command.get(), nullptr, reply.out(), &error))
        << error.message;
    return coll;
  }

  WriteOutcome Bulk(const char* name, bool ordered) {
    CollectionPtr coll = UniqueCollection(name);
    BulkPtr bulk(mongoc_collection_create_bulk_operation_with_opts(coll.get(), Bson().Add("ordered", ordered).get()));
    bson_error_t error;
    for (const Bson& doc : DocsWithDuplicates()) {
      EXPECT_TRUE(mongoc_bulk_operation_insert_with_opts(bulk.get(), doc.get(), nullptr, &error)) << error.message;
    }
    Bson reply;
    EXPECT_EQ(mongoc_bulk_operation_execute(bulk.get(), reply.out(), &error), 0u) << "duplicates were accepted";
    EXPECT_EQ(error.code, 11000u) << error.message;
    return OutcomeOf(coll.get(), reply, "nInserted");
  }

  WriteOutcome RawInsert(const char* name) {
    CollectionPtr coll = UniqueCollection(name);
    Bson command = Bson().Add("insert", name).AddArray("documents", DocsWithDuplicates()).Add("ordered", false);
    Bson reply;
    bson_error_t error;
    // A reply with writeErrors is still ok: 1 at the command level.
    EXPECT_TRUE(mongoc_collection_write_command_with_opts(coll.get(), command.get(), nullptr, reply.out(), &error))
        << error.message;
    EXPECT_EQ(reply.Int("ok"), 1) << reply.Json();
    return OutcomeOf(coll.get(), reply, "n");
  }

  mongoc_client_t* client_;
  std::string db_name_;
};

using DuplicateKeyTest = DriverTest;

TEST_F(DuplicateKeyTest, WriteErrorsMatchMongoDbAndTheBackend) {
  Outcomes through_server = Scenario(client(), db_name()).Run();

  // MongoDB's semantics: ordered stops at the first duplicate; unordered
  // reports every duplicate at the client's statement index.
  const WriteErrors ordered_errors = {{2, 11000}};
  const WriteErrors unordered_errors = {{2, 11000}, {4, 11000}};
  EXPECT_EQ(through_server.ordered_bulk.errors, ordered_errors);
  EXPECT_EQ(through_server.ordered_bulk.stored_ids, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(through_server.unordered_bulk.errors, unordered_errors);
  EXPECT_EQ(through_server.unordered_bulk.stored_ids, (std::vector<int64_t>{0, 1, 3, 5}));
  EXPECT_EQ(through_server.raw_unordered_insert.errors, unordered_errors);
  EXPECT_EQ(through_server.raw_unordered_insert.stored_ids, (std::vector<int64_t>{0, 1, 3, 5}));

  ClientPtr direct = NewClient(BackendUri().get());
  ASSERT_TRUE(direct);
  Scenario backend_scenario(direct.get(), TestDatabaseName("_direct"));
  Outcomes from_backend = backend_scenario.Run();
  backend_scenario.Drop();
  EXPECT_EQ(through_server.ordered_bulk, from_backend.ordered_bulk);
  EXPECT_EQ(through_server.unordered_bulk, from_backend.unordered_bulk);
  EXPECT_EQ(through_server.raw_unordered_insert, from_backend.raw_unordered_insert);
}

}  // namespace
}  // namespace e2e
