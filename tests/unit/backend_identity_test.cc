// remold's own identity on the backend: where it is read from
// (config/backend_credentials.h) and the libmongoc URI of its own connections
// (proxy/routing/own_connection_uri.h).
#include <gtest/gtest.h>
#include <mongoc/mongoc.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "config/backend_credentials.h"
#include "config/config.h"
#include "proxy/routing/own_connection_uri.h"

namespace remold {
namespace {

Environment Env(std::map<std::string, std::string> values) {
  return [values](const char* name) -> std::optional<std::string> {
    auto found = values.find(name);
    if (found == values.end()) return std::nullopt;
    return found->second;
  };
}

class CredentialsFile {
 public:
  explicit CredentialsFile(const std::string& text) {
    path_ = std::filesystem::temp_directory_path() /
            ("remold-credentials-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".yaml");
    std::ofstream(path_) << text;
  }
  ~CredentialsFile() { std::filesystem::remove(path_); }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

std::string ErrorOf(const std::string& file, const Environment& env) {
  try {
    LoadBackendIdentity(file, env);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(BackendCredentialsTest, NoneWhenNothingNamesOne) {
  EXPECT_FALSE(LoadBackendIdentity("", Env({})).enabled);
}

TEST(BackendCredentialsTest, FromTheEnvironmentWithDefaults) {
  BackendIdentity identity =
      LoadBackendIdentity("", Env({{"REMOLD_BACKEND_USERNAME", "remold"}, {"REMOLD_BACKEND_PASSWORD", "pw"}}));
  ASSERT_TRUE(identity.enabled);
  EXPECT_EQ(identity.mechanism, AuthMechanism::kScramSha256);
  EXPECT_EQ(identity.username, "remold");
  EXPECT_EQ(identity.password, "pw");
  EXPECT_EQ(identity.source, "admin");
  EXPECT_EQ(Describe(identity), "SCRAM-SHA-256 as 'remold' (admin)");
}

TEST(BackendCredentialsTest, FromAFileWhichWinsOverTheEnvironment) {
  CredentialsFile file("username: ops\npassword: 'p:w@x'\nmechanism: scram-sha-1\nsource: ops_db\n");
  BackendIdentity identity =
      LoadBackendIdentity(file.path(), Env({{"REMOLD_BACKEND_USERNAME", "other"}, {"REMOLD_BACKEND_PASSWORD", "x"}}));
  EXPECT_EQ(identity.mechanism, AuthMechanism::kScramSha1);
  EXPECT_EQ(identity.username, "ops");
  EXPECT_EQ(identity.password, "p:w@x");
  EXPECT_EQ(identity.source, "ops_db");
}

TEST(BackendCredentialsTest, X509NeedsNoPasswordAndUsesExternal) {
  BackendIdentity identity = LoadBackendIdentity("", Env({{"REMOLD_BACKEND_AUTH_MECHANISM", "MONGODB-X509"}}));
  ASSERT_TRUE(identity.enabled);
  EXPECT_EQ(identity.mechanism, AuthMechanism::kX509);
  EXPECT_EQ(identity.source, "$external");
  EXPECT_EQ(Describe(identity), "MONGODB-X509 as the certificate's subject ($external)");
}

TEST(BackendCredentialsTest, MistakesAreNamedWithoutThePassword) {
  EXPECT_EQ(ErrorOf("", Env({{"REMOLD_BACKEND_USERNAME", "u"}})),
            "the REMOLD_BACKEND_* environment: SCRAM-SHA-256 needs a password");
  EXPECT_EQ(ErrorOf("", Env({{"REMOLD_BACKEND_PASSWORD", "secret-1"}})),
            "the REMOLD_BACKEND_* environment: SCRAM-SHA-256 needs a username");
  EXPECT_EQ(ErrorOf("", Env({{"REMOLD_BACKEND_AUTH_SOURCE", "admin"}})),
            "REMOLD_BACKEND_AUTH_SOURCE is set, but no REMOLD_BACKEND_USERNAME");
  EXPECT_EQ(ErrorOf("", Env({{"REMOLD_BACKEND_USERNAME", "u"}, {"REMOLD_BACKEND_PASSWORD", "secret-2"},
                             {"REMOLD_BACKEND_AUTH_MECHANISM", "PLAIN"}})),
            "the REMOLD_BACKEND_* environment: unknown mechanism 'PLAIN' (expected SCRAM-SHA-256, SCRAM-SHA-1 or "
            "MONGODB-X509)");
  EXPECT_EQ(ErrorOf("", Env({{"REMOLD_BACKEND_AUTH_MECHANISM", "MONGODB-X509"}, {"REMOLD_BACKEND_PASSWORD", "s"}})),
            "the REMOLD_BACKEND_* environment: MONGODB-X509 takes no password (the certificate is the proof)");
  CredentialsFile typo("username: u\npasword: secret-3\n");
  const std::string error = ErrorOf(typo.path(), Env({}));
  EXPECT_NE(error.find(":2: unknown key 'pasword'"), std::string::npos) << error;
  EXPECT_EQ(error.find("secret-3"), std::string::npos) << error;
  EXPECT_EQ(ErrorOf("/nonexistent/remold-credentials.yaml", Env({})),
            "backend_credentials: cannot read '/nonexistent/remold-credentials.yaml'");
}

BackendOptions Backend(const std::string& uri) {
  std::string error;
  std::optional<BackendOptions> backend = ParseBackendUri(uri, error);
  EXPECT_TRUE(backend) << error;
  return backend.value_or(BackendOptions{});
}

TEST(OwnConnectionUriTest, CarriesHostsOptionsAndTheIdentity) {
  BackendIdentity identity;
  identity.enabled = true;
  identity.username = "remold";
  identity.password = "p@ss:word";
  std::string error;
  MongocUriPtr uri = OwnConnectionUri(
      Backend("mongodb://a:1,[::1]:2/?connectTimeoutMS=5000&replicaSet=rs0&tls=true&tlsCAFile=/ca.pem"), identity,
      "remold-reconcile", error);
  ASSERT_TRUE(uri) << error;
  const mongoc_host_list_t* hosts = mongoc_uri_get_hosts(uri.get());
  ASSERT_NE(hosts, nullptr);
  EXPECT_STREQ(hosts->host_and_port, "a:1");
  ASSERT_NE(hosts->next, nullptr);
  EXPECT_STREQ(hosts->next->host, "::1");
  EXPECT_STREQ(mongoc_uri_get_replica_set(uri.get()), "rs0");
  EXPECT_EQ(mongoc_uri_get_option_as_int32(uri.get(), MONGOC_URI_CONNECTTIMEOUTMS, 0), 5000);
  EXPECT_STREQ(mongoc_uri_get_option_as_utf8(uri.get(), MONGOC_URI_APPNAME, nullptr), "remold-reconcile");
  EXPECT_TRUE(mongoc_uri_get_tls(uri.get()));
  EXPECT_STREQ(mongoc_uri_get_option_as_utf8(uri.get(), MONGOC_URI_TLSCAFILE, nullptr), "/ca.pem");
  EXPECT_STREQ(mongoc_uri_get_username(uri.get()), "remold");
  EXPECT_STREQ(mongoc_uri_get_password(uri.get()), "p@ss:word");
  EXPECT_STREQ(mongoc_uri_get_auth_mechanism(uri.get()), "SCRAM-SHA-256");
  EXPECT_STREQ(mongoc_uri_get_auth_source(uri.get()), "admin");
  EXPECT_FALSE(mongoc_uri_get_option_as_bool(uri.get(), MONGOC_URI_DIRECTCONNECTION, true));
}

TEST(OwnConnectionUriTest, WithoutAnIdentityNothingAuthenticates) {
  std::string error;
  MongocUriPtr uri = OwnConnectionUri(Backend("mongodb://h/?directConnection=true"), BackendIdentity{}, "remold", error);
  ASSERT_TRUE(uri) << error;
  EXPECT_EQ(mongoc_uri_get_username(uri.get()), nullptr);
  EXPECT_EQ(mongoc_uri_get_auth_mechanism(uri.get()), nullptr);
  EXPECT_TRUE(mongoc_uri_get_option_as_bool(uri.get(), MONGOC_URI_DIRECTCONNECTION, false));
}

TEST(OwnConnectionUriTest, X509PresentsItsCertificateOverTls) {
  BackendIdentity identity;
  identity.enabled = true;
  identity.mechanism = AuthMechanism::kX509;
  identity.source = "$external";
  std::string error;
  EXPECT_FALSE(OwnConnectionUri(Backend("mongodb://h"), identity, "remold", error));
  EXPECT_EQ(error, "MONGODB-X509 authenticates with a TLS client certificate: the backend URI needs tls=true");
  EXPECT_FALSE(OwnConnectionUri(Backend("mongodb://h/?tls=true"), identity, "remold", error));
  EXPECT_NE(error.find("needs a client certificate"), std::string::npos) << error;
  MongocUriPtr uri = OwnConnectionUri(Backend("mongodb://h/?tls=true&tlsCertificateKeyFile=/uri.pem"), identity,
                                      "remold", error);
  ASSERT_TRUE(uri) << error;
  EXPECT_STREQ(mongoc_uri_get_option_as_utf8(uri.get(), MONGOC_URI_TLSCERTIFICATEKEYFILE, nullptr), "/uri.pem");
  EXPECT_STREQ(mongoc_uri_get_auth_mechanism(uri.get()), "MONGODB-X509");
  EXPECT_STREQ(mongoc_uri_get_auth_source(uri.get()), "$external");
  identity.certificate_key_file = "/own.pem";
  uri = OwnConnectionUri(Backend("mongodb://h/?tls=true&tlsCertificateKeyFile=/uri.pem"), identity, "remold", error);
  ASSERT_TRUE(uri) << error;
  EXPECT_STREQ(mongoc_uri_get_option_as_utf8(uri.get(), MONGOC_URI_TLSCERTIFICATEKEYFILE, nullptr), "/own.pem");
}

}  // namespace
}  // namespace remold
