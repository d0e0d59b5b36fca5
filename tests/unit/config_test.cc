#include "config/config.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace remold {
namespace {

namespace fs = std::filesystem;

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "remold-config-test-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }

  std::string WriteFile(const std::string& name, const std::string& text) {
    fs::path path = dir_ / name;
    std::ofstream(path) << text;
    return path.string();
  }

  // The ConfigError text of loading `args` (empty if it loaded).
  static std::string ErrorOf(const std::vector<std::string>& args) {
    try {
      LoadServeConfig(args);
    } catch (const ConfigError& e) {
      return e.what();
    }
    ADD_FAILURE() << "configuration was accepted";
    return "";
  }

  fs::path dir_;
};

TEST_F(ConfigTest, DefaultsWithOnlyABackendFlag) {
  Config config = LoadServeConfig({"--backend", "mongodb://db:27017"});
  EXPECT_EQ(config.listen.host, "127.0.0.1");
  EXPECT_EQ(config.listen.port, 27018);
  EXPECT_EQ(config.backend_uri, "mongodb://db:27017");
  ASSERT_EQ(config.backend.hosts.size(), 1u);
  EXPECT_EQ(config.backend.hosts[0].host, "db");
  EXPECT_EQ(config.log_level, "info");
  EXPECT_EQ(config.threads, 0);
  EXPECT_EQ(config.drain_timeout, std::chrono::milliseconds(30'000));
  EXPECT_TRUE(config.rules_dir.empty());
  EXPECT_EQ(config.backend_pool_size, 0) << "one backend connection per client unless asked";
  EXPECT_EQ(config.backend.wait_queue_timeout, std::chrono::milliseconds(10'000));
}

TEST_F(ConfigTest, BackendPoolSizeAndItsWaitQueueTimeout) {
  std::string file = WriteFile("remold.yaml",
                               "backend: mongodb://h/?waitQueueTimeoutMS=250\n"
                               "backend_pool_size: 50\n");
  Config config = LoadServeConfig({"--config", file});
  EXPECT_EQ(config.backend_pool_size, 50);
  EXPECT_EQ(config.backend.wait_queue_timeout, std::chrono::milliseconds(250));
  EXPECT_EQ(LoadServeConfig({"--backend", "mongodb://h", "--backend-pool-size", "8"}).backend_pool_size, 8);
  EXPECT_NE(ErrorOf({"--backend", "mongodb://h", "--backend-pool-size", "-1"}).find("--backend-pool-size"),
            std::string::npos);
  EXPECT_NE(ErrorOf({"--backend", "mongodb://h/?waitQueueTimeoutMS=0"}).find("waitQueueTimeoutMS"),
            std::string::npos);
}

TEST_F(ConfigTest, ReadsEveryFileKey) {
  std::string rules = (dir_ / "rules").string();
  fs::create_directory(rules);
  std::string file = WriteFile("remold.yaml",
                               "listen: 0.0.0.0:27100\n"
                               "backend: mongodb://a:1,b:2/?connectTimeoutMS=500\n"
                               "rules: " + rules + "\n"
                               "log_level: debug\n"
                               "threads: 4\n"
                               "drain_timeout_ms: 1500\n");
  Config config = LoadServeConfig({"--config", file});
  EXPECT_EQ(config.listen.host, "0.0.0.0");
  EXPECT_EQ(config.listen.port, 27100);
  EXPECT_EQ(config.backend_uri, "mongodb://a:1,b:2/?connectTimeoutMS=500");
  ASSERT_EQ(config.backend.hosts.size(), 2u);
  EXPECT_EQ(config.backend.hosts[1].port, 2);
  EXPECT_EQ(config.backend.connect_timeout, std::chrono::milliseconds(500));
  EXPECT_EQ(config.rules_dir, rules);
  EXPECT_EQ(config.log_level, "debug");
  EXPECT_EQ(config.threads, 4);
  EXPECT_EQ(config.drain_timeout, std::chrono::milliseconds(1500));
}

TEST_F(ConfigTest, FlagsOverrideTheFile) {
  std::string file = WriteFile("remold.yaml",
                               "listen: 127.0.0.1:1000\n"
                               "backend: mongodb://from-file\n"
                               "log_level: debug\n"
                               "threads: 2\n");
  Config config = LoadServeConfig(
      {"--listen", "[::1]:2000", "--config", file, "--backend", "mongodb://from-flag"});
  EXPECT_EQ(config.listen.host, "::1");
  EXPECT_EQ(config.listen.port, 2000);
  EXPECT_EQ(config.backend_uri, "mongodb://from-flag");
  ASSERT_EQ(config.backend.hosts.size(), 1u);
  EXPECT_EQ(config.backend.hosts[0].host, "from-flag");
  EXPECT_EQ(config.log_level, "debug") << "keys without a flag keep the file's value";
  EXPECT_EQ(config.threads, 2);
}

TEST_F(ConfigTest, FlagBeforeConfigStillWins) {
  std::string file = WriteFile("remold.yaml", "backend: mongodb://h\nlog_level: debug\n");
  Config config = LoadServeConfig({"--log-level", "warn", "--config", file});
  EXPECT_EQ(config.log_level, "warn");
}

TEST_F(ConfigTest, UnknownKeyNamesTheKeyAndLine) {
  std::string file = WriteFile("remold.yaml",
                               "backend: mongodb://h\n"
                               "\n"
                               "log_levle: debug\n");
  std::string error = ErrorOf({"--config", file});
  EXPECT_NE(error.find(file + ":3:"), std::string::npos) << error;
  EXPECT_NE(error.find("unknown key 'log_levle'"), std::string::npos) << error;
  EXPECT_NE(error.find("log_level"), std::string::npos) << "should list the expected keys: " << error;
}

TEST_F(ConfigTest, ConfigIsNotAFileKey) {
  std::string file = WriteFile("remold.yaml", "backend: mongodb://h\nconfig: other.yaml\n");
  std::string error = ErrorOf({"--config", file});
  EXPECT_NE(error.find("'config'"), std::string::npos) << error;
}

TEST_F(ConfigTest, BadLogLevelFlag) {
  std::string error = ErrorOf({"--backend", "mongodb://h", "--log-level", "verbose"});
  EXPECT_NE(error.find("--log-level"), std::string::npos) << error;
  EXPECT_NE(error.find("'verbose'"), std::string::npos) << error;
}

TEST_F(ConfigTest, BadLogLevelInFileNamesKeyAndLine) {
  std::string file = WriteFile("remold.yaml", "backend: mongodb://h\nlog_level: loud\n");
  std::string error = ErrorOf({"--config", file});
  EXPECT_NE(error.find(":2:"), std::string::npos) << error;
  EXPECT_NE(error.find("'log_level'"), std::string::npos) << error;
  EXPECT_NE(error.find("'loud'"), std::string::npos) << error;
}

TEST_F(ConfigTest, EveryLogLevelIsAccepted) {
  for (const char* level : {"trace", "debug", "info", "warn", "error", "off"}) {
    EXPECT_EQ(LoadServeConfig({"--backend", "mongodb://h", "--log-level", level}).log_level, level);
  }
}

TEST_F(ConfigTest, BackendIsRequired) {
  std::string error = ErrorOf({"--log-level", "info"});
  EXPECT_NE(error.find("backend"), std::string::npos) << error;
  EXPECT_NE(error.find("required"), std::string::npos) << error;
}

TEST_F(ConfigTest, BadBackendUriIsReported) {
  std::string error = ErrorOf({"--backend", "mongodb://h/?bogus=1"});
  EXPECT_EQ(error.rfind("backend: ", 0), 0u) << error;
  EXPECT_NE(error.find("'bogus'"), std::string::npos) << error;
}

TEST_F(ConfigTest, BackendTlsOptionsAreKept) {
  Config config = LoadServeConfig(
      {"--backend", "mongodb://h/?tls=true&tlsCAFile=/etc/ca.pem&tlsAllowInvalidHostnames=true"});
  EXPECT_TRUE(config.backend.tls.enabled);
  EXPECT_EQ(config.backend.tls.ca_file, "/etc/ca.pem");
  EXPECT_TRUE(config.backend.tls.allow_invalid_hostnames);
}

TEST_F(ConfigTest, UnknownFlagIsNamed) {
  std::string error = ErrorOf({"--backend", "mongodb://h", "--listne", "x"});
  EXPECT_NE(error.find("'--listne'"), std::string::npos) << error;
}

TEST_F(ConfigTest, FlagWithoutValue) {
  std::string error = ErrorOf({"--backend", "mongodb://h", "--threads"});
  EXPECT_NE(error.find("--threads"), std::string::npos) << error;
  error = ErrorOf({"--config"});
  EXPECT_NE(error.find("--config"), std::string::npos) << error;
}

TEST_F(ConfigTest, BadNumbersNameTheSetting) {
  for (const char* value : {"-1", "many", "4x", ""}) {
    std::string error = ErrorOf({"--backend", "mongodb://h", "--threads", value});
    EXPECT_NE(error.find("--threads"), std::string::npos) << error;
  }
  std::string file = WriteFile("remold.yaml", "backend: mongodb://h\ndrain_timeout_ms: soon\n");
  std::string error = ErrorOf({"--config", file});
  EXPECT_NE(error.find("'drain_timeout_ms'"), std::string::npos) << error;
  EXPECT_NE(error.find("'soon'"), std::string::npos) << error;
}

TEST_F(ConfigTest, BadListenAddress) {
  std::string error = ErrorOf({"--backend", "mongodb://h", "--listen", "localhost:99999"});
  EXPECT_NE(error.find("--listen"), std::string::npos) << error;
  EXPECT_NE(error.find("HOST:PORT"), std::string::npos) << error;
}

TEST_F(ConfigTest, RulesMustBeADirectory) {
  std::string error = ErrorOf({"--backend", "mongodb://h", "--rules", (dir_ / "missing").string()});
  EXPECT_NE(error.find("rules"), std::string::npos) << error;
  EXPECT_NE(error.find("not a directory"), std::string::npos) << error;
}

TEST_F(ConfigTest, MissingConfigFile) {
  std::string missing = (dir_ / "nope.yaml").string();
  std::string error = ErrorOf({"--config", missing});
  EXPECT_NE(error.find(missing), std::string::npos) << error;
  EXPECT_NE(error.find("cannot read"), std::string::npos) << error;
}

TEST_F(ConfigTest, InvalidYamlNamesTheLine) {
  std::string file = WriteFile("remold.yaml", "backend: mongodb://h\nlisten: [unclosed\n");
  std::string error = ErrorOf({"--config", file});
  EXPECT_NE(error.find(file + ":"), std::string::npos) << error;
  EXPECT_NE(error.find("invalid YAML"), std::string::npos) << error;
}

TEST_F(ConfigTest, ValuesMustBeScalars) {
  std::string file = WriteFile("remold.yaml", "backend: mongodb://h\nlisten:\n  - a\n  - b\n");
  std::string error = ErrorOf({"--config", file});
  EXPECT_NE(error.find("'listen'"), std::string::npos) << error;
  EXPECT_NE(error.find("single value"), std::string::npos) << error;
}

TEST_F(ConfigTest, TopLevelMustBeAMapping) {
  std::string file = WriteFile("remold.yaml", "- backend\n- listen\n");
  std::string error = ErrorOf({"--config", file});
  EXPECT_NE(error.find("mapping"), std::string::npos) << error;
}

TEST_F(ConfigTest, EmptyFileIsAllowed) {
  std::string file = WriteFile("remold.yaml", "");
  Config config = LoadServeConfig({"--config", file, "--backend", "mongodb://h"});
  EXPECT_EQ(config.backend_uri, "mongodb://h");
}

// A key that is not a scalar must be a ConfigError like any other mistake:
// main() catches only ConfigError, so anything else aborts the process.
TEST_F(ConfigTest, NonScalarKeyIsAConfigError) {
  std::string file = WriteFile("remold.yaml", "backend: mongodb://h\n[a, b]: 1\n");
  try {
    LoadServeConfig({"--config", file});
    ADD_FAILURE() << "configuration was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(":2:"), std::string::npos) << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw a non-ConfigError exception: " << e.what();
  }
}

TEST(ServeUsage, ListsEveryFlag) {
  std::string usage = ServeUsage();
  for (const char* flag : {"--listen", "--backend", "--rules", "--log-level", "--threads",
                           "--drain-timeout-ms", "--config"}) {
    EXPECT_NE(usage.find(flag), std::string::npos) << flag;
  }
}

}  // namespace
}  // namespace remold
