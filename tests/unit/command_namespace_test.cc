// ResolveNamespace (rewrite/command_namespace.h): the one reading of the
// namespace a command addresses, for rule lookup, the engine and the log.
#include "rewrite/command_namespace.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "common/doc.h"

namespace remold {
namespace {

std::optional<CommandNamespace> Resolve(std::string_view json) {
  std::optional<Doc> body = Doc::FromJson(json);
  EXPECT_TRUE(body) << json;
  bson_iter_t first;
  bson_iter_init(&first, body->get());
  bson_iter_next(&first);
  return ResolveNamespace(bson_iter_key(&first), body->get());
}

TEST(ResolveNamespace, CollectionCommandsNameTheirCollection) {
  for (const char* json :
       {R"({"find": "c", "$db": "d"})", R"({"insert": "c", "documents": [], "$db": "d"})",
        R"({"aggregate": "c", "pipeline": [], "$db": "d"})", R"({"drop": "c", "$db": "d"})",
        R"({"createIndexes": "c", "indexes": [], "$db": "d"})", R"({"killCursors": "c", "$db": "d"})",
        R"({"convertToCapped": "c", "size": 1, "$db": "d"})"}) {
    std::optional<CommandNamespace> ns = Resolve(json);
    ASSERT_TRUE(ns) << json;
    EXPECT_EQ(ns->db, "d") << json;
    EXPECT_EQ(ns->collection, "c") << json;
    EXPECT_TRUE(ns->known) << json;
  }
}

TEST(ResolveNamespace, AnUnknownCommandsStringIsReadButNotKnown) {
  // Rule lookup still sees it (a rule refuses unknown commands); the log does not.
  std::optional<CommandNamespace> ns = Resolve(R"({"noSuchCommand": "secret", "$db": "d"})");
  ASSERT_TRUE(ns);
  EXPECT_EQ(ns->collection, "secret");
  EXPECT_FALSE(ns->known);
}

TEST(ResolveNamespace, DataSizeNamesAFullNamespace) {
  std::optional<CommandNamespace> ns = Resolve(R"({"dataSize": "app.readings.x", "$db": "admin"})");
  ASSERT_TRUE(ns);
  EXPECT_EQ(ns->db, "app");
  EXPECT_EQ(ns->collection, "readings.x");
  EXPECT_TRUE(ns->known);
  ns = Resolve(R"({"dataSize": "nodot", "$db": "admin"})");
  ASSERT_TRUE(ns);
  EXPECT_FALSE(ns->collection);
}

TEST(ResolveNamespace, GetMoreNamesItsCollectionField) {
  std::optional<CommandNamespace> ns =
      Resolve(R"({"getMore": {"$numberLong": "5"}, "collection": "c", "$db": "d"})");
  ASSERT_TRUE(ns);
  EXPECT_EQ(ns->collection, "c");
}

TEST(ResolveNamespace, ExplainNamesTheExplainedCommandsCollection) {
  std::optional<CommandNamespace> ns =
      Resolve(R"({"explain": {"find": "c", "filter": {}}, "verbosity": "queryPlanner", "$db": "d"})");
  ASSERT_TRUE(ns);
  EXPECT_EQ(ns->db, "d");
  EXPECT_EQ(ns->collection, "c");
  ns = Resolve(R"({"explain": {"getMore": 1, "collection": "g"}, "$db": "d"})");
  EXPECT_EQ(ns->collection, "g");
}

TEST(ResolveNamespace, DatabaseCommandsNameNoCollection) {
  for (const char* json :
       {R"({"ping": 1, "$db": "admin"})", R"({"createUser": "alice", "pwd": "x", "roles": [], "$db": "d"})",
        R"({"renameCollection": "d.a", "to": "d.b", "$db": "admin"})",
        R"({"find": 5, "$db": "d"})", R"({"explain": "find", "$db": "d"})"}) {
    std::optional<CommandNamespace> ns = Resolve(json);
    ASSERT_TRUE(ns) << json;
    EXPECT_FALSE(ns->collection) << json << " named " << *ns->collection;
  }
}

TEST(ResolveNamespace, NoDatabaseNoNamespace) {
  EXPECT_FALSE(Resolve(R"({"find": "c"})"));
  EXPECT_FALSE(Resolve(R"({"find": "c", "$db": 1})"));
}

}  // namespace
}  // namespace remold
