// Process harness: spawns the backend and remold with posix_spawn, reads
// each one's readiness line from a stdout pipe within a deadline, forwards
// anything they print afterwards to our stderr, and stops them at the end:
// remold by SIGTERM (must exit 0 promptly, even with an idle client still
// connected), the backend by closing its stdin.

#include "harness.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <mongoc/mongoc.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "build_paths.h"

extern char** environ;

namespace harness {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr auto kBackendStartTimeout = 60s;  // a cold JVM on a busy 2-core box
constexpr auto kProxyStartTimeout = 20s;
constexpr auto kProxyStopTimeout = 20s;
constexpr auto kBackendStopTimeout = 10s;

std::string Getenv(const char* name, const std::string& fallback = "") {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) {
    return "exited with status " + std::to_string(WEXITSTATUS(status));
  }
  if (WIFSIGNALED(status)) {
    return std::string("was killed by signal ") + strsignal(WTERMSIG(status));
  }
  return "ended with wait status " + std::to_string(status);
}

// A child process whose stdout (and optionally stdin) is a pipe to us.
class Child {
 public:
  Child(std::string name, const std::vector<std::string>& argv, bool pipe_stdin)
      : name_(std::move(name)) {
    int out[2] = {-1, -1};
    int in[2] = {-1, -1};
    if (pipe2(out, O_CLOEXEC) != 0 || (pipe_stdin && pipe2(in, O_CLOEXEC) != 0)) {
      throw std::runtime_error("pipe2: " + std::string(strerror(errno)));
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    if (pipe_stdin) {
      posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
    } else {
      posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    }
    std::vector<char*> args;
    for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    int rc = posix_spawnp(&pid_, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(out[1]);
    stdout_fd_ = out[0];
    if (pipe_stdin) {
      close(in[0]);
      stdin_fd_ = in[1];
    }
    if (rc != 0) {
      pid_ = -1;
      throw std::runtime_error("cannot start " + name_ + " (" + argv[0] + "): " + strerror(rc));
    }
  }

  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  ~Child() {
    if (Running()) {
      kill(pid_, SIGKILL);
      Wait(5s);
    }
    CloseStdin();
    if (forwarder_.joinable()) forwarder_.join();
    if (stdout_fd_ >= 0) close(stdout_fd_);
  }

  const std::string& name() const { return name_; }

  // Reads stdout lines until one starts with `prefix`; returns the rest of
  // that line. Other lines are echoed to stderr. nullopt on EOF or timeout.
  std::optional<std::string> AwaitLine(const std::string& prefix, Clock::duration timeout) {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
      size_t newline = pending_.find('\n');
      if (newline != std::string::npos) {
        std::string line = pending_.substr(0, newline);
        pending_.erase(0, newline + 1);
        if (line.starts_with(prefix)) return line.substr(prefix.size());
        std::fprintf(stderr, "[%s] %s\n", name_.c_str(), line.c_str());
        continue;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left <= 0ms) return std::nullopt;
      pollfd pfd{stdout_fd_, POLLIN, 0};
      if (poll(&pfd, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[4096];
      ssize_t n = read(stdout_fd_, buf, sizeof buf);
      if (n <= 0) return std::nullopt;
      pending_.append(buf, static_cast<size_t>(n));
    }
  }

  // After the readiness line: copy further stdout to stderr so the child
  // never blocks on a full pipe.
  void ForwardOutput() {
    forwarder_ = std::thread([this] {
      if (!pending_.empty()) std::fputs(pending_.c_str(), stderr);
      char buf[4096];
      ssize_t n;
      while ((n = read(stdout_fd_, buf, sizeof buf)) > 0) {
        std::fwrite(buf, 1, static_cast<size_t>(n), stderr);
      }
    });
  }

  void CloseStdin() {
    if (stdin_fd_ >= 0) close(stdin_fd_);
    stdin_fd_ = -1;
  }

  void Signal(int sig) {
    if (Running()) kill(pid_, sig);
  }

  bool Running() {
    if (pid_ < 0 || status_) return false;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) status_ = status;
    return !status_;
  }

  // The wait status once the child has ended, or nullopt if it is still
  // running after `timeout`.
  std::optional<int> Wait(Clock::duration timeout) {
    const auto deadline = Clock::now() + timeout;
    while (Running() && Clock::now() < deadline) std::this_thread::sleep_for(20ms);
    return status_;
  }

 private:
  std::string name_;
  pid_t pid_ = -1;
  int stdin_fd_ = -1;
  int stdout_fd_ = -1;
  std::string pending_;
  std::optional<int> status_;
  std::thread forwarder_;
};

// A client that has connected and run a command, then stays idle; it is
// held open across remold's SIGTERM, which must close it at once.
class IdleClient {
 public:
  explicit IdleClient(const std::string& uri)
      : client_(mongoc_client_new((uri + "/?serverSelectionTimeoutMS=5000&socketTimeoutMS=10000").c_str())) {
    bson_t* ping = bson_new();
    bson_append_int32(ping, "ping", -1, 1);
    bson_error_t error{};
    EXPECT_TRUE(client_ != nullptr && mongoc_client_command_simple(client_, "admin", ping, nullptr, nullptr, &error))
        << "remold did not answer a ping before shutdown: " << error.message;
    bson_destroy(ping);
  }
  ~IdleClient() { mongoc_client_destroy(client_); }
  IdleClient(const IdleClient&) = delete;
  IdleClient& operator=(const IdleClient&) = delete;

 private:
  mongoc_client_t* client_;
};

Endpoints g_endpoints;

class ServersEnvironment : public testing::Environment {
 public:
  void SetUp() override {
    try {
      StartServers();
    } catch (const std::exception& e) {
      proxy_.reset();
      GTEST_FAIL() << e.what();
    }
    std::fprintf(stderr, "[harness] backend %s, tests connect to %s%s\n",
                 g_endpoints.backend_uri.c_str(), g_endpoints.server_uri.c_str(),
                 g_endpoints.through_proxy ? " (remold)" : " (no proxy)");
  }

  void TearDown() override {
    if (proxy_) StopProxy();
    if (backend_) StopBackend();
  }

  bool ProxyAlive(std::string* why) {
    if (!proxy_ || proxy_->Running()) return true;
    if (why != nullptr) *why = "remold " + DescribeWaitStatus(*proxy_->Wait(0s));
    return false;
  }

 private:
  void StartServers() {
    const std::string source_dir = Getenv("REMOLD_SOURCE_DIR", build_paths::kSourceDir);
    g_endpoints.backend_uri = Getenv("REMOLD_TEST_BACKEND_URI");
    if (g_endpoints.backend_uri.empty()) {
      const std::string backend_dir = source_dir + "/tests/backend";
      backend_ = std::make_unique<Child>(
          "backend",
          std::vector<std::string>{"java", "-cp", backend_dir + "/lib/*:" + backend_dir + "/classes",
                                   "Launcher", "127.0.0.1", "0"},
          /*pipe_stdin=*/true);
      g_endpoints.backend_uri = "mongodb://" + AwaitAddress(*backend_, "listening ", kBackendStartTimeout);
    }
    g_endpoints.server_uri = g_endpoints.backend_uri;
    if (Getenv("REMOLD_TEST_NO_PROXY") == "1") return;

    const std::string binary = Getenv("REMOLD_BINARY", build_paths::kRemoldBinary);
    proxy_ = std::make_unique<Child>(
        "remold",
        std::vector<std::string>{binary, "serve", "--listen", "127.0.0.1:0", "--backend",
                                 g_endpoints.backend_uri, "--log-level", "warn",
                                 // the compression tests negotiate with remold itself
                                 "--client-compression", "on"},
        /*pipe_stdin=*/false);
    g_endpoints.server_uri = "mongodb://" + AwaitAddress(*proxy_, "remold listening on ", kProxyStartTimeout);
    g_endpoints.through_proxy = true;
  }

  static std::string AwaitAddress(Child& child, const std::string& prefix, Clock::duration timeout) {
    std::optional<std::string> address = child.AwaitLine(prefix, timeout);
    if (!address || address->empty()) {
      std::string expected = "'" + prefix + "HOST:PORT'";
      if (std::optional<int> status = child.Wait(2s)) {
        throw std::runtime_error(child.name() + " " + DescribeWaitStatus(*status) + " without printing " + expected);
      }
      throw std::runtime_error(child.name() + " did not print " + expected + " within " +
                               std::to_string(std::chrono::duration_cast<std::chrono::seconds>(timeout).count()) + " s");
    }
    child.ForwardOutput();
    return *address;
  }

  void StopProxy() {
    if (!proxy_->Running()) {
      std::string why;
      ProxyAlive(&why);
      ADD_FAILURE() << why << " before the end of the suite";
      return;
    }
    // A connected, idle client must not hold up the drain.
    IdleClient idle(g_endpoints.server_uri);
    proxy_->Signal(SIGTERM);
    std::optional<int> status = proxy_->Wait(kProxyStopTimeout);
    if (!status) {
      ADD_FAILURE() << "remold did not exit within " << kProxyStopTimeout.count() << " s of SIGTERM";
    } else {
      const bool exited_cleanly = WIFEXITED(*status) && WEXITSTATUS(*status) == 0;
      EXPECT_TRUE(exited_cleanly) << "after SIGTERM remold " << DescribeWaitStatus(*status)
                                  << "; want exit status 0";
    }
    proxy_.reset();
  }

  void StopBackend() {
    backend_->CloseStdin();
    if (!backend_->Wait(kBackendStopTimeout)) {
      backend_->Signal(SIGTERM);
      backend_->Wait(kBackendStopTimeout);
    }
    backend_.reset();
  }

  std::unique_ptr<Child> backend_;
  std::unique_ptr<Child> proxy_;
};

ServersEnvironment* g_environment = nullptr;

}  // namespace

const Endpoints& Current() { return g_endpoints; }

bool ProxyAlive(std::string* why) { return g_environment == nullptr || g_environment->ProxyAlive(why); }

void Install() {
  g_environment = new ServersEnvironment;  // owned by gtest
  testing::AddGlobalTestEnvironment(g_environment);
}

}  // namespace harness
