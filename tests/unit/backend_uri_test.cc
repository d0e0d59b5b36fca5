#include "proxy/wire/backend_uri.h"

#include <gtest/gtest.h>

namespace remold {
namespace {

BackendOptions MustParse(std::string_view uri) {
  std::string error;
  std::optional<BackendOptions> options = ParseBackendUri(uri, error);
  EXPECT_TRUE(options.has_value()) << uri << ": " << error;
  return options.value_or(BackendOptions{});
}

// Returns the error text (empty if the URI was wrongly accepted).
std::string MustFail(std::string_view uri) {
  std::string error;
  std::optional<BackendOptions> options = ParseBackendUri(uri, error);
  EXPECT_FALSE(options.has_value()) << uri << " was accepted";
  EXPECT_FALSE(!options && error.empty()) << uri << ": rejected without a reason";
  return options ? "" : error;
}

TEST(ParseBackendUri, SingleHostDefaultsToPort27017) {
  BackendOptions options = MustParse("mongodb://db.example");
  ASSERT_EQ(options.hosts.size(), 1u);
  EXPECT_EQ(options.hosts[0].host, "db.example");
  EXPECT_EQ(options.hosts[0].port, 27017);
  EXPECT_FALSE(options.tls.enabled);
  EXPECT_EQ(options.connect_timeout, std::chrono::milliseconds(10'000));
}

TEST(ParseBackendUri, HostsAndPorts) {
  BackendOptions options = MustParse("mongodb://a:1,b,127.0.0.1:65535/");
  ASSERT_EQ(options.hosts.size(), 3u);
  EXPECT_EQ(options.hosts[0].host, "a");
  EXPECT_EQ(options.hosts[0].port, 1);
  EXPECT_EQ(options.hosts[1].host, "b");
  EXPECT_EQ(options.hosts[1].port, 27017);
  EXPECT_EQ(options.hosts[2].host, "127.0.0.1");
  EXPECT_EQ(options.hosts[2].port, 65535);
}

TEST(ParseBackendUri, Ipv6Literals) {
  BackendOptions options = MustParse("mongodb://[::1]:27019,[fe80::1:2]/?tls=false");
  ASSERT_EQ(options.hosts.size(), 2u);
  EXPECT_EQ(options.hosts[0].host, "::1");
  EXPECT_EQ(options.hosts[0].port, 27019);
  EXPECT_EQ(options.hosts[1].host, "fe80::1:2");
  EXPECT_EQ(options.hosts[1].port, 27017);
}

TEST(ParseBackendUri, TlsOptions) {
  BackendOptions options = MustParse(
      "mongodb://h/?tls=true&tlsCAFile=/etc/ca.pem&tlsCertificateKeyFile=/etc/client.pem"
      "&tlsAllowInvalidHostnames=true&tlsAllowInvalidCertificates=false");
  EXPECT_TRUE(options.tls.enabled);
  EXPECT_EQ(options.tls.ca_file, "/etc/ca.pem");
  EXPECT_EQ(options.tls.certificate_key_file, "/etc/client.pem");
  EXPECT_TRUE(options.tls.allow_invalid_hostnames);
  EXPECT_FALSE(options.tls.allow_invalid_certificates);
}

TEST(ParseBackendUri, SslIsAnAliasOfTls) {
  EXPECT_TRUE(MustParse("mongodb://h/?ssl=true").tls.enabled);
}

TEST(ParseBackendUri, TlsInsecureSetsBothAllowances) {
  BackendOptions options = MustParse("mongodb://h/?tlsInsecure=true");
  EXPECT_TRUE(options.tls.allow_invalid_hostnames);
  EXPECT_TRUE(options.tls.allow_invalid_certificates);
}

TEST(ParseBackendUri, OptionNamesAreCaseInsensitive) {
  BackendOptions options = MustParse("mongodb://h/?TLS=true&CONNECTTIMEOUTMS=1500");
  EXPECT_TRUE(options.tls.enabled);
  EXPECT_EQ(options.connect_timeout, std::chrono::milliseconds(1500));
}

TEST(ParseBackendUri, CompressorsInOrderOnce) {
  EXPECT_TRUE(MustParse("mongodb://h").compressors.empty());
  EXPECT_EQ(MustParse("mongodb://h/?compressors=zstd,snappy,zstd,zlib").compressors,
            (std::vector<wire::Compressor>{wire::Compressor::kZstd, wire::Compressor::kSnappy, wire::Compressor::kZlib}));
  EXPECT_NE(MustFail("mongodb://h/?compressors=zstd,lz4").find("'lz4', which remold cannot use"), std::string::npos);
  EXPECT_NE(MustFail("mongodb://h/?compressors=noop").find("'noop'"), std::string::npos);
  EXPECT_NE(MustFail("mongodb://h/?compressors=zstd,").find("''"), std::string::npos);
}

TEST(ParseBackendUri, ConnectTimeout) {
  EXPECT_EQ(MustParse("mongodb://h/?connectTimeoutMS=2500").connect_timeout,
            std::chrono::milliseconds(2500));
  for (const char* bad : {"0", "-5", "abc", "12x", ""}) {
    std::string error = MustFail(std::string("mongodb://h/?connectTimeoutMS=") + bad);
    EXPECT_NE(error.find("connectTimeoutMS"), std::string::npos) << error;
  }
}

TEST(ParseBackendUri, DiscoveryOptionsAreAccepted) {
  BackendOptions options =
      MustParse("mongodb://h1,h2/?directConnection=false&replicaSet=rs0&appName=my%20app&");
  EXPECT_EQ(options.hosts.size(), 2u);
}

TEST(ParseBackendUri, BadBooleanNamesTheOption) {
  std::string error = MustFail("mongodb://h/?tlsAllowInvalidHostnames=yes");
  EXPECT_NE(error.find("'tlsAllowInvalidHostnames'"), std::string::npos) << error;
}

TEST(ParseBackendUri, UnknownOptionNamesTheOption) {
  std::string error = MustFail("mongodb://h/?tls=false&authSource=admin");
  EXPECT_NE(error.find("'authSource'"), std::string::npos) << error;
  EXPECT_NE(error.find("not supported"), std::string::npos) << error;
  error = MustFail("mongodb://h/?w=majority");
  EXPECT_NE(error.find("'w'"), std::string::npos) << error;
}

TEST(ParseBackendUri, OptionWithoutValueIsAnError) {
  std::string error = MustFail("mongodb://h/?tls");
  EXPECT_NE(error.find("'tls'"), std::string::npos) << error;
}

TEST(ParseBackendUri, CredentialsAreRejected) {
  for (const char* uri : {"mongodb://user:s3cret@h:27017", "mongodb://user@h/",
                          "mongodb://user:s3cret@h1,h2/?tls=false"}) {
    std::string error = MustFail(uri);
    EXPECT_NE(error.find("credentials"), std::string::npos) << error;
    EXPECT_EQ(error.find("s3cret"), std::string::npos) << "error leaks the password: " << error;
  }
}

TEST(ParseBackendUri, SchemeMustBeMongodb) {
  for (const char* uri : {"", "h:27017", "mongodb+srv://cluster.example", "http://h"}) {
    std::string error = MustFail(uri);
    EXPECT_NE(error.find("mongodb://"), std::string::npos) << error;
  }
}

TEST(ParseBackendUri, DatabaseIsRejected) {
  std::string error = MustFail("mongodb://h/admin?tls=false");
  EXPECT_NE(error.find("'admin'"), std::string::npos) << error;
}

TEST(ParseBackendUri, MissingHostIsRejected) {
  MustFail("mongodb://");
  MustFail("mongodb:///");
  MustFail("mongodb:///?tls=false");
  MustFail("mongodb://a,,b");
  MustFail("mongodb://:27017");
}

TEST(ParseBackendUri, BadPortsAreRejected) {
  for (const char* uri : {"mongodb://h:", "mongodb://h:abc", "mongodb://h:65536", "mongodb://h:-1",
                          "mongodb://h:+1", "mongodb://h:27017x", "mongodb://[::1]:foo",
                          "mongodb://[::1]:65536"}) {
    std::string error = MustFail(uri);
    EXPECT_NE(error.find("port"), std::string::npos) << error;
  }
}

// Connection String spec, invalid-uris: "Invalid port (zero) with hostname"
// and "... with IP literal". Nothing listens on port 0.
TEST(ParseBackendUri, PortZeroIsRejected) {
  MustFail("mongodb://localhost:0/");
  MustFail("mongodb://[::1]:0/");
}

// Connection String spec, invalid-uris: "Double colon in host identifier".
// Parsing takes the last colon, so "localhost::27017" became host "localhost:".
TEST(ParseBackendUri, DoubleColonInHostIsRejected) {
  MustFail("mongodb://localhost::27017");
  MustFail("mongodb://localhost::27017/");
  MustFail("mongodb://::");
  MustFail("mongodb://localhost::27017,abc");
}

TEST(ParseBackendUri, MalformedIpv6IsRejected) {
  std::string error = MustFail("mongodb://[::1");
  EXPECT_NE(error.find("'['"), std::string::npos) << error;
  MustFail("mongodb://[::1]x");
  MustFail("mongodb://[]:27017");
}

TEST(ParseHostAndPort, ParsesHostPortAndBracketedV6) {
  std::string error;
  auto a = ParseHostAndPort("0.0.0.0:27018", error);
  ASSERT_TRUE(a) << error;
  EXPECT_EQ(a->host, "0.0.0.0");
  EXPECT_EQ(a->port, 27018);
  auto b = ParseHostAndPort("[::]:1", error);
  ASSERT_TRUE(b) << error;
  EXPECT_EQ(b->host, "::");
  EXPECT_EQ(b->port, 1);
  auto c = ParseHostAndPort("localhost", error);
  ASSERT_TRUE(c) << error;
  EXPECT_EQ(c->port, 27017);
  EXPECT_FALSE(ParseHostAndPort("", error));
  EXPECT_FALSE(ParseHostAndPort(":1", error));
}

}  // namespace
}  // namespace remold
