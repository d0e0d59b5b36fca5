// The pure parts of pooled mode: the hello a shared connection may carry,
// the login key of a conversation, and what ties a client to its
// connection.
#include <gtest/gtest.h>

#include "proxy/routing/connection_pins.h"
#include "proxy/wire/login_identity.h"
#include "proxy/wire/op_msg.h"
#include "proxy/wire/op_query.h"
#include "proxy/wire/request.h"
#include "proxy/wire/shared_link_hello.h"
#include "tests/unit/test_util.h"

namespace remold {
namespace {

using remold::testing::Bytes;
using remold::testing::Doc;
using remold::testing::Json;
using remold::testing::OpQueryMessage;

TEST(SharedLinkHello, OpMsgHelloLosesWhatBelongsToTheClientOrHoldsTheConnection) {
  const Bytes hello = Doc(BCON_NEW("hello", BCON_INT32(1), "client", "{", "application", "{", "name", "app", "}", "}",
                                   "speculativeAuthenticate", "{", "saslStart", BCON_INT32(1), "}",
                                   "compression", "[", "snappy", "]", "topologyVersion", "{", "counter",
                                   BCON_INT64(3), "}", "maxAwaitTimeMS", BCON_INT64(10000),
                                   "saslSupportedMechs", "admin.ann", "$db", "admin"));
  const std::vector<uint8_t> message =
      wire::EncodeOpMsg(7, 0, wire::msg_flags::kExhaustAllowed, hello);
  std::optional<std::vector<uint8_t>> shared = wire::SharedLinkHello(message);
  ASSERT_TRUE(shared.has_value());
  EXPECT_EQ(wire::ReadHeader(*shared).request_id, 7);
  wire::OpMsgView view;
  ASSERT_FALSE(wire::ParseOpMsg(*shared, view).has_value());
  EXPECT_FALSE(view.exhaust_allowed());
  EXPECT_EQ(Json(view.body), R"({ "hello" : 1, "saslSupportedMechs" : "admin.ann", "$db" : "admin" })");
}

TEST(SharedLinkHello, LegacyOpQueryHandshakeToo) {
  const Bytes query = Doc(BCON_NEW("ismaster", BCON_INT32(1), "helloOk", BCON_BOOL(true), "client", "{", "driver",
                                   "{", "name", "PyMongo", "}", "}", "speculativeAuthenticate", "{", "saslStart",
                                   BCON_INT32(1), "}", "compression", "[", "zstd", "]"));
  const Bytes message = OpQueryMessage(9, "admin.$cmd", query, 0, 0, -1, {});
  std::optional<std::vector<uint8_t>> shared = wire::SharedLinkHello(message);
  ASSERT_TRUE(shared.has_value());
  wire::OpQueryView view;
  ASSERT_FALSE(wire::ParseOpQuery(*shared, view).has_value());
  EXPECT_EQ(Json(view.query), R"({ "ismaster" : 1, "helloOk" : true })");
}

TEST(SharedLinkHello, WrappedLegacyQueryIsEditedInside) {
  const Bytes query = Doc(BCON_NEW("$query", "{", "isMaster", BCON_INT32(1), "client", "{", "a", BCON_INT32(1), "}",
                                   "}", "$readPreference", "{", "mode", "primary", "}"));
  const Bytes message = OpQueryMessage(9, "admin.$cmd", query, 0, 0, -1, {});
  std::optional<std::vector<uint8_t>> shared = wire::SharedLinkHello(message);
  ASSERT_TRUE(shared.has_value());
  wire::OpQueryView view;
  ASSERT_FALSE(wire::ParseOpQuery(*shared, view).has_value());
  EXPECT_EQ(Json(view.query), R"({ "$query" : { "isMaster" : 1 }, "$readPreference" : { "mode" : "primary" } })");
}

TEST(SharedLinkHello, AwaitableHelloWaitIsItsMaxAwaitTime) {
  EXPECT_EQ(wire::AwaitableHelloWait(Doc(BCON_NEW("hello", BCON_INT32(1), "topologyVersion", "{", "counter",
                                                  BCON_INT64(0), "}", "maxAwaitTimeMS", BCON_INT64(1500)))),
            std::chrono::milliseconds(1500));
  // Without topologyVersion the server answers at once.
  EXPECT_EQ(wire::AwaitableHelloWait(Doc(BCON_NEW("hello", BCON_INT32(1), "maxAwaitTimeMS", BCON_INT64(1500)))),
            std::nullopt);
  EXPECT_EQ(wire::AwaitableHelloWait(Doc(BCON_NEW("hello", BCON_INT32(1)))), std::nullopt);
}

Bytes SaslStart(const char* mechanism, const std::string& payload, const char* db = "admin") {
  return Doc(BCON_NEW("saslStart", BCON_INT32(1), "mechanism", mechanism, "payload",
                      BCON_BIN(BSON_SUBTYPE_BINARY, reinterpret_cast<const uint8_t*>(payload.data()),
                               static_cast<uint32_t>(payload.size())),
                      "$db", db));
}

TEST(LoginIdentity, ScramKeyIsDatabaseMechanismAndUserAsSent) {
  const std::optional<std::string> ann = wire::LoginIdentity(SaslStart("SCRAM-SHA-256", "n,,n=ann,r=abc"));
  ASSERT_TRUE(ann.has_value());
  EXPECT_EQ(*ann, std::string("admin\0SCRAM-SHA-256\0\0ann", 24));
  // Other users, databases, mechanisms and authorization identities differ.
  EXPECT_NE(wire::LoginIdentity(SaslStart("SCRAM-SHA-256", "n,,n=bob,r=abc")), ann);
  EXPECT_NE(wire::LoginIdentity(SaslStart("SCRAM-SHA-256", "n,,n=ann,r=abc", "app")), ann);
  EXPECT_NE(wire::LoginIdentity(SaslStart("SCRAM-SHA-1", "n,,n=ann,r=abc")), ann);
  EXPECT_NE(wire::LoginIdentity(SaslStart("SCRAM-SHA-256", "n,a=bob,n=ann,r=abc")), ann);
  // The nonce does not matter; escapes are kept as sent (never unescaped).
  EXPECT_EQ(wire::LoginIdentity(SaslStart("SCRAM-SHA-256", "n,,n=ann,r=xyz")), ann);
  EXPECT_NE(wire::LoginIdentity(SaslStart("SCRAM-SHA-256", "n,,n=a=2Cnn,r=x")),
            wire::LoginIdentity(SaslStart("SCRAM-SHA-256", "n,,n=a,r=x")));
}

TEST(LoginIdentity, PlainAndAuthenticateHaveKeysOthersNone) {
  EXPECT_TRUE(wire::LoginIdentity(SaslStart("PLAIN", std::string("\0ann\0secret", 11), "$external")).has_value());
  EXPECT_NE(wire::LoginIdentity(SaslStart("PLAIN", std::string("\0ann\0secret", 11), "$external")),
            wire::LoginIdentity(SaslStart("PLAIN", std::string("\0bob\0secret", 11), "$external")));
  EXPECT_TRUE(wire::LoginIdentity(Doc(BCON_NEW("authenticate", BCON_INT32(1), "mechanism", "MONGODB-X509", "user",
                                               "CN=ann", "$db", "$external")))
                  .has_value());
  // No user to read: no key (the client keeps its connection for good).
  EXPECT_FALSE(wire::LoginIdentity(Doc(BCON_NEW("authenticate", BCON_INT32(1), "mechanism", "MONGODB-X509", "$db",
                                                "$external")))
                   .has_value());
  EXPECT_FALSE(wire::LoginIdentity(SaslStart("MONGODB-AWS", "opaque")).has_value());
  EXPECT_FALSE(wire::LoginIdentity(SaslStart("SCRAM-SHA-256", "garbage")).has_value());
  EXPECT_FALSE(wire::LoginIdentity(Doc(BCON_NEW("find", "c", "$db", "admin"))).has_value());
}

TEST(LoginIdentity, ConversationDone) {
  EXPECT_TRUE(wire::ConversationDone(Doc(BCON_NEW("done", BCON_BOOL(true), "ok", BCON_DOUBLE(1)))));
  EXPECT_FALSE(wire::ConversationDone(Doc(BCON_NEW("done", BCON_BOOL(false), "ok", BCON_DOUBLE(1)))));
  EXPECT_FALSE(wire::ConversationDone(Doc(BCON_NEW("ok", BCON_DOUBLE(1)))));
}

wire::Request Command(const char* name, const Bytes& body, std::vector<uint8_t>& storage) {
  storage = wire::EncodeOpMsg(1, 0, 0, body);
  wire::Request request;
  EXPECT_FALSE(wire::DecodeRequest(storage, request).has_value()) << name;
  return request;
}

TEST(ConnectionPins, CommandsTiedToTheConnection) {
  std::vector<uint8_t> storage;
  for (const char* name : {"getLastError", "getlasterror", "getPrevError", "resetError", "currentOp", "killOp",
                           "logout"}) {
    EXPECT_TRUE(IsConnectionScoped(Command(name, Doc(BCON_NEW(name, BCON_INT32(1), "$db", "admin")), storage)))
        << name;
  }
  EXPECT_TRUE(IsConnectionScoped(Command("aggregate", Doc(BCON_NEW("aggregate", BCON_INT32(1), "pipeline", "[",
                                                                    "{", "$currentOp", "{", "}", "}", "]", "$db",
                                                                    "admin")),
                                         storage)));
  // A collection's aggregate, or one on another database, is not.
  EXPECT_FALSE(IsConnectionScoped(
      Command("aggregate", Doc(BCON_NEW("aggregate", "c", "pipeline", "[", "]", "$db", "admin")), storage)));
  EXPECT_FALSE(IsConnectionScoped(
      Command("aggregate", Doc(BCON_NEW("aggregate", BCON_INT32(1), "pipeline", "[", "]", "$db", "app")), storage)));
  EXPECT_FALSE(IsConnectionScoped(Command("find", Doc(BCON_NEW("find", "c", "$db", "app")), storage)));
  EXPECT_TRUE(EndsTransaction(Command("c", Doc(BCON_NEW("commitTransaction", BCON_INT32(1), "$db", "admin")), storage)));
  EXPECT_TRUE(EndsTransaction(Command("a", Doc(BCON_NEW("abortTransaction", BCON_INT32(1), "$db", "admin")), storage)));
  EXPECT_FALSE(EndsTransaction(Command("f", Doc(BCON_NEW("find", "c", "$db", "app")), storage)));
}

}  // namespace
}  // namespace remold
