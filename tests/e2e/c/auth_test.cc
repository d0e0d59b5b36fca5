// Authentication pass-through with mongo-c-driver: SCRAM-SHA-256 conversations
// (speculativeAuthenticate in the handshake, saslStart, saslContinue) relayed
// by remold to a backend that enforces them, so each client acts as itself; a
// wrong password gets the backend's authentication error and no data.
//
// The suite's shared backend has no authentication, so these tests start
// their own: FerretDB with its new authentication (tests/backend/ferretdb,
// built by scripts/install-deps.sh), SQLite in a temporary directory, a
// free loopback port, and a remold (--log-level debug) in front of it.
// Skipped when REMOLD_TEST_BACKEND_URI is set: the harness controls neither
// that server's users nor its auth settings. FerretDB is used for
// authentication only, never to judge rewrite semantics.

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <regex>
#include <sstream>
#include <thread>

#include "build_paths.h"
#include "driver.h"
#include "harness.h"

extern char** environ;

namespace e2e {
namespace {

using namespace std::chrono_literals;

constexpr int32_t kUnauthorized = 13;

std::string Getenv(const char* name, const std::string& fallback = "") {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

std::string RandomHex(size_t bytes) {
  std::random_device device;
  std::string out;
  for (size_t i = 0; i < bytes; ++i) {
    char buf[3];
    std::snprintf(buf, sizeof buf, "%02x", static_cast<unsigned>(device() & 0xff));
    out += buf;
  }
  return out;
}

size_t Count(const std::string& text, const std::string& what) {
  size_t count = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++count;
  return count;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A child whose stdout and stderr both go to `log_path`.
class Process {
 public:
  Process(const std::vector<std::string>& argv, std::string log_path) : log_path_(std::move(log_path)) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path_.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0600);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    std::vector<char*> args;
    for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    int rc = posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
      pid_ = -1;
      error_ = "cannot start " + argv[0] + ": " + strerror(rc);
    }
  }
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  ~Process() { Stop(); }

  const std::string& error() const { return error_; }
  std::string Log() const { return ReadFile(log_path_); }

  // The first match of `pattern` in the log, within `timeout`; "" and error() set otherwise.
  std::smatch Await(const std::regex& pattern, std::chrono::seconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::smatch match;
    while (error_.empty()) {
      log_ = Log();
      if (std::regex_search(log_, match, pattern)) return match;
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        error_ = "exited (wait status " + std::to_string(status) + ")";
      } else if (std::chrono::steady_clock::now() > deadline) {
        error_ = "timed out after " + std::to_string(timeout.count()) + " s";
      } else {
        std::this_thread::sleep_for(50ms);
      }
    }
    error_ += "; its output:\n" + Log();
    return match;
  }

  // SIGTERM, then SIGKILL after `grace`; the exit status (-1 if none).
  int Stop(std::chrono::seconds grace = 15s) {
    if (pid_ < 0) return -1;
    kill(pid_, SIGTERM);
    int status = 0;
    for (auto deadline = std::chrono::steady_clock::now() + grace;
         std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(20ms)) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return status;
      }
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return -1;
  }

 private:
  pid_t pid_ = -1;
  std::string log_path_;
  std::string log_;  // keeps the strings Await's match points into alive
  std::string error_;
};

struct User {
  std::string name;
  std::string password;
};

class AuthTest : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!Getenv("REMOLD_TEST_BACKEND_URI").empty()) return;  // SetUp skips
    setup_error_ = new std::string;
    std::string& error = *setup_error_;
    const std::string source_dir = Getenv("REMOLD_SOURCE_DIR", harness::build_paths::kSourceDir);
    const std::string ferretdb = source_dir + "/tests/backend/ferretdb/bin/ferretdb";
    if (access(ferretdb.c_str(), X_OK) != 0) {
      error = "FerretDB test backend not found at " + ferretdb + ": run scripts/install-deps.sh";
      return;
    }
    char dir_template[] = "/tmp/remold-auth-c-XXXXXX";
    if (mkdtemp(dir_template) == nullptr) {
      error = "mkdtemp failed";
      return;
    }
    dir_ = new std::string(dir_template);
    mkdir((*dir_ + "/data").c_str(), 0700);

    admin_ = new User{"remold_admin", "adm-" + RandomHex(12)};
    backend_ = new Process({ferretdb, "--handler=sqlite", "--sqlite-url=file:" + *dir_ + "/data/",
                            "--state-dir=" + *dir_, "--listen-addr=127.0.0.1:0", "--debug-addr=-",
                            "--telemetry=disable", "--log-level=debug", "--test-enable-new-auth", "--setup-database=admin",
                            "--setup-username=" + admin_->name, "--setup-password=" + admin_->password},
                           *dir_ + "/ferretdb.log");
    std::smatch port = backend_->Await(std::regex(R"(Listening on TCP (\S+):(\d+)\.\.\.)"), 60s);
    if (!backend_->error().empty()) {
      error = "FerretDB: " + backend_->error();
      return;
    }
    backend_address_ = new std::string(port[1].str() + ":" + port[2].str());

    users_ = new std::vector<User>{{"alice", "pw-alice-" + RandomHex(10)}, {"bob", "pw-bob-" + RandomHex(10)}};
    ClientPtr admin = NewClient(UriFor(*backend_address_, admin_, "").get());
    for (const User& user : *users_) {
      bson_error_t err{};
      // FerretDB v1.24 has no roles: createUser takes only an empty list.
      Bson command = Json(R"({"createUser": ")" + user.name + R"(", "pwd": ")" + user.password +
                          R"(", "roles": [], "mechanisms": ["SCRAM-SHA-256"]})");
      if (!admin || !mongoc_client_command_simple(admin.get(), "admin", command.get(), nullptr, nullptr, &err)) {
        error = "createUser " + user.name + ": " + err.message;
        return;
      }
    }

    server_address_ = new std::string(*backend_address_);
    if (Getenv("REMOLD_TEST_NO_PROXY") == "1") return;
    const std::string binary = Getenv("REMOLD_BINARY", harness::build_paths::kRemoldBinary);
    proxy_ = new Process({binary, "serve", "--listen", "127.0.0.1:0", "--backend",
                          "mongodb://" + *backend_address_, "--log-level", "debug"},
                         *dir_ + "/remold.log");
    std::smatch listening = proxy_->Await(std::regex(R"(remold listening on (\S+):(\d+))"), 20s);
    if (!proxy_->error().empty()) {
      error = "remold: " + proxy_->error();
      return;
    }
    *server_address_ = listening[1].str() + ":" + listening[2].str();
  }

  static void TearDownTestSuite() {
    if (proxy_ != nullptr) {
      int status = proxy_->Stop();
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
          << "remold in front of FerretDB did not exit 0 on SIGTERM (wait status " << status << ")";
    }
    delete proxy_;
    delete backend_;
    if (dir_ != nullptr) std::system(("rm -rf '" + *dir_ + "'").c_str());
    for (auto* p : {dir_, backend_address_, server_address_, setup_error_}) delete p;
    delete admin_;
    delete users_;
    proxy_ = backend_ = nullptr;
    dir_ = backend_address_ = server_address_ = setup_error_ = nullptr;
    admin_ = nullptr;
    users_ = nullptr;
  }

  void SetUp() override {
    if (setup_error_ == nullptr) {
      GTEST_SKIP() << "REMOLD_TEST_BACKEND_URI is set: these tests need a backend whose users and "
                      "auth settings the harness controls (they start FerretDB when it is unset)";
    }
    ASSERT_TRUE(setup_error_->empty()) << *setup_error_;
    db_name_ = TestDatabaseName();
  }

  void TearDown() override {
    if (setup_error_ == nullptr || !setup_error_->empty()) return;
    ClientPtr admin = NewClient(UriFor(*backend_address_, admin_, "").get());
    bson_error_t error;
    if (admin) {
      mongoc_client_command_simple(admin.get(), db_name_.c_str(), Json(R"({"dropDatabase": 1})").get(),
                                   nullptr, nullptr, &error);
    }
    if (proxy_ != nullptr) {
      std::string why;
      EXPECT_TRUE(harness::ProxyAlive(&why)) << why;
    }
  }

  // A URI for `address` as `user` (anonymous when null), with `mechanism` if not "".
  static UriPtr UriFor(const std::string& address, const User* user, const std::string& mechanism,
                       const std::string& password_override = "") {
    std::string text = "mongodb://";
    if (user != nullptr) {
      text += user->name + ":" + (password_override.empty() ? user->password : password_override) + "@";
    }
    text += address + "/?authSource=admin";
    if (!mechanism.empty()) text += "&authMechanism=" + mechanism;
    return TestUri(text);
  }

  static const User& Named(const std::string& name) {
    for (const User& user : *users_) {
      if (user.name == name) return user;
    }
    throw std::runtime_error("no user " + name);
  }

  ClientPtr ClientAs(const std::string& name, const std::string& mechanism = "",
                     const std::string& password_override = "") {
    return NewClient(UriFor(*server_address_, &Named(name), mechanism, password_override).get());
  }
  ClientPtr AnonymousClient() { return NewClient(UriFor(*server_address_, nullptr, "").get()); }

  // The users authenticated on the client's connection, as JSON.
  static std::string Who(mongoc_client_t* client) {
    Bson reply;
    bson_error_t error;
    if (!mongoc_client_command_simple(client, "admin", Json(R"({"connectionStatus": 1})").get(), nullptr,
                                      reply.out(), &error)) {
      return std::string("error: ") + error.message;
    }
    std::optional<Bson> users = reply.Doc("authInfo.authenticatedUsers");
    return users ? users->Json() : reply.Json();
  }

  static std::string UsersJson(const std::string& name) {
    return Normalized(R"({"0": {"user": ")" + name + R"(", "db": "admin"}})");
  }

  // Runs find on `coll`; the documents, or the error in `error`.
  std::vector<Bson> Find(mongoc_client_t* client, const char* coll, bson_error_t* error) {
    CollectionPtr collection(mongoc_client_get_collection(client, db_name_.c_str(), coll));
    CursorPtr cursor(mongoc_collection_find_with_opts(collection.get(), Json("{}").get(), nullptr, nullptr));
    std::vector<Bson> docs;
    const bson_t* doc;
    while (mongoc_cursor_next(cursor.get(), &doc)) docs.emplace_back(doc);
    *error = bson_error_t{};
    mongoc_cursor_error(cursor.get(), error);
    return docs;
  }

  void SeedSecret() {
    ClientPtr admin = NewClient(UriFor(*backend_address_, admin_, "").get());
    CollectionPtr secret(mongoc_client_get_collection(admin.get(), db_name_.c_str(), "secret"));
    bson_error_t error;
    ASSERT_TRUE(mongoc_collection_insert_one(secret.get(), Json(R"({"_id": 1, "secret": "s"})").get(), nullptr,
                                             nullptr, &error))
        << error.message;
  }

  std::string db_name_;

  static inline std::string* setup_error_ = nullptr;  // null: skipped
  static inline std::string* dir_ = nullptr;
  static inline std::string* backend_address_ = nullptr;
  static inline std::string* server_address_ = nullptr;  // remold, or FerretDB without a proxy
  static inline User* admin_ = nullptr;
  static inline std::vector<User>* users_ = nullptr;
  static inline Process* backend_ = nullptr;
  static inline Process* proxy_ = nullptr;
};

TEST_F(AuthTest, ScramSha256InsertAndRead) {
  const size_t passed_before = Count(backend_->Log(), "Speculative authentication passed");
  for (const char* mechanism : {"SCRAM-SHA-256", ""}) {  // "": the default negotiation
    SCOPED_TRACE(*mechanism ? mechanism : "default mechanism");
    ClientPtr client = ClientAs("alice", mechanism);
    ASSERT_TRUE(client);
    CollectionPtr coll(mongoc_client_get_collection(client.get(), db_name_.c_str(), "c"));
    bson_error_t error;
    Bson doc = Bson().Add("by", "alice").Add("mechanism", *mechanism ? mechanism : "default");
    ASSERT_TRUE(mongoc_collection_insert_one(coll.get(), doc.get(), nullptr, nullptr, &error)) << error.message;
    std::vector<Bson> found = Find(client.get(), "c", &error);
    EXPECT_EQ(error.code, 0u) << error.message;
    EXPECT_EQ(found.size(), *mechanism ? 1u : 2u);
    EXPECT_EQ(Who(client.get()), UsersJson("alice"));
  }
  // libmongoc authenticated speculatively, inside the handshake that remold
  // rewrites: once per client, as FerretDB's debug log tells.
  EXPECT_GE(Count(backend_->Log(), "Speculative authentication passed"), passed_before + 2);
}

TEST_F(AuthTest, WrongPasswordGetsBackendErrorAndNoData) {
  SeedSecret();
  for (const char* mechanism : {"SCRAM-SHA-256", ""}) {
    SCOPED_TRACE(*mechanism ? mechanism : "default mechanism");
    ClientPtr client = ClientAs("alice", mechanism, "not-" + Named("alice").password);
    ASSERT_TRUE(client);
    bson_error_t error;
    std::vector<Bson> found = Find(client.get(), "secret", &error);
    EXPECT_TRUE(found.empty()) << ToJson(found)[0];
    EXPECT_EQ(error.domain, static_cast<uint32_t>(MONGOC_ERROR_CLIENT)) << error.message;
    EXPECT_EQ(error.code, static_cast<uint32_t>(MONGOC_ERROR_CLIENT_AUTHENTICATE)) << error.message;
    // The backend's own message, relayed.
    EXPECT_NE(std::string(error.message).find("Authentication failed"), std::string::npos) << error.message;

    CollectionPtr coll(mongoc_client_get_collection(client.get(), db_name_.c_str(), "secret"));
    EXPECT_FALSE(mongoc_collection_insert_one(coll.get(), Json(R"({"_id": 2})").get(), nullptr, nullptr, &error));
  }
  ClientPtr admin = NewClient(UriFor(*backend_address_, admin_, "").get());
  bson_error_t error;
  EXPECT_EQ(ToJson(Find(admin.get(), "secret", &error)),
            std::vector<std::string>{Normalized(R"({"_id": 1, "secret": "s"})")});
}

TEST_F(AuthTest, UnauthenticatedClientRefusedByBackend) {
  SeedSecret();
  ClientPtr client = AnonymousClient();
  ASSERT_TRUE(client);
  bson_error_t error;
  std::vector<Bson> found = Find(client.get(), "secret", &error);
  EXPECT_TRUE(found.empty());
  EXPECT_EQ(error.domain, static_cast<uint32_t>(MONGOC_ERROR_SERVER)) << error.message;
  EXPECT_EQ(error.code, static_cast<uint32_t>(kUnauthorized)) << error.message;
  EXPECT_EQ(Who(client.get()), Normalized("{}"));
}

TEST_F(AuthTest, TwoUsersOnOneRemoldEachActAsThemselves) {
  ClientPtr alice = ClientAs("alice", "SCRAM-SHA-256");
  ClientPtr bob = ClientAs("bob", "SCRAM-SHA-256");
  ClientPtr anonymous = AnonymousClient();
  ASSERT_TRUE(alice && bob && anonymous);
  for (int round = 0; round < 5; ++round) {
    EXPECT_EQ(Who(alice.get()), UsersJson("alice"));
    EXPECT_EQ(Who(bob.get()), UsersJson("bob"));
    EXPECT_EQ(Who(anonymous.get()), Normalized("{}"));
  }
}

TEST_F(AuthTest, RemoldDebugLogHasNoPassword) {
  if (proxy_ == nullptr) GTEST_SKIP() << "no proxy: REMOLD_TEST_NO_PROXY=1";
  const std::string wrong = "not-" + Named("bob").password;
  {
    ClientPtr good = ClientAs("bob", "SCRAM-SHA-256");
    ClientPtr bad = ClientAs("bob", "SCRAM-SHA-256", wrong);
    bson_error_t error;
    Find(good.get(), "c", &error);
    EXPECT_EQ(error.code, 0u) << error.message;
    Find(bad.get(), "c", &error);
    EXPECT_EQ(error.code, static_cast<uint32_t>(MONGOC_ERROR_CLIENT_AUTHENTICATE)) << error.message;
  }
  const std::string log = proxy_->Log();
  // The log did record these sessions (it is not empty for some other reason).
  EXPECT_NE(log.find("session"), std::string::npos) << "remold logged no session:\n" << log.substr(0, 2000);
  std::vector<std::string> secrets = {wrong, admin_->password};
  for (const User& user : *users_) secrets.push_back(user.password);
  for (const std::string& secret : secrets) {
    EXPECT_EQ(log.find(secret), std::string::npos) << "a password appears in remold's log";
  }
}

}  // namespace
}  // namespace e2e
