#include "proxy/server.h"

#include <spdlog/spdlog.h>

#include <csignal>
#include <unordered_set>

#include "proxy/metrics.h"
#include "proxy/pool_metrics.h"
#include "proxy/session.h"

namespace remold {

// A thread with its own io_context and the sessions that live on it.
class Server::Worker {
 public:
  Worker(ConnectionLimiter& connections, const PoolOptions& pool)
      : connections_(connections),
        pool_(pool.max_per_member > 0 ? std::make_shared<BackendPool>(pool) : nullptr),
        guard_(asio::make_work_guard(context_)) {
    SweepIdleSessions();
    thread_ = std::thread([this] { context_.run(); });
  }
  ~Worker() { Join(); }

  asio::io_context& context() { return context_; }
  // This worker's backend pool; null unless pooled.
  const std::shared_ptr<BackendPool>& pool() const { return pool_; }

  // Called on this worker's thread.
  void Start(std::shared_ptr<Session> session) {
    sessions_.insert(session);
    if (draining_) session->Drain();
    active_.fetch_add(1);
    asio::co_spawn(context_, session->Run(), [this, session](std::exception_ptr error) {
      if (error) {
        try {
          std::rethrow_exception(error);
        } catch (const std::exception& e) {
          spdlog::error("session ended by an unexpected error: {}", e.what());
        }
        GlobalMetrics().LocalShard().CountConnectionError(ConnectionError::kInternal);
      }
      sessions_.erase(session);
      active_.fetch_sub(1);
      connections_.Release();
    });
  }

  void Drain() {
    asio::post(context_, [this] {
      draining_ = true;
      for (const auto& session : sessions_) session->Drain();
    });
  }

  void Abort() {
    asio::post(context_, [this] {
      for (const auto& session : sessions_) session->Abort();
    });
  }

  uint64_t active() const { return active_.load(); }

  void Join() {
    guard_.reset();
    if (thread_.joinable()) {
      context_.stop();
      thread_.join();
    }
  }

 private:
  // Every second, each session between requests checks whether the backend
  // closed the connection carrying its client's credentials
  // (Session::CheckIdleBackend): a timer per worker, nothing per request.
  void SweepIdleSessions() {
    sweep_.expires_after(std::chrono::seconds(1));
    sweep_.async_wait([this](boost::system::error_code ec) {
      if (ec) return;
      for (const auto& session : sessions_) session->CheckIdleBackend();
      SweepIdleSessions();
    });
  }

  ConnectionLimiter& connections_;
  // Every socket of this context is used on its thread only (accepted
  // sockets come with registration, which stays locked): the reactor's
  // per-socket locks are off, two lock pairs fewer per read.
  asio::io_context context_{BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO};
  // Shared with this worker's sessions; declared after the context, so its
  // sockets go before the context does (or with the last session, as the
  // context destroys them).
  std::shared_ptr<BackendPool> pool_;
  SteadyTimer sweep_{context_};
  asio::executor_work_guard<asio::io_context::executor_type> guard_;
  std::thread thread_;
  std::unordered_set<std::shared_ptr<Session>> sessions_;
  bool draining_ = false;  // touched only on this worker's thread
  std::atomic<uint64_t> active_{0};
};

Server::Server(ServerOptions options)
    : options_(std::move(options)), connections_(options_.policy.limits.max_connections) {
  if (!options_.rules) options_.rules = std::make_shared<const RuleSetHolder>();
  int threads = options_.worker_threads > 0 ? options_.worker_threads
                                            : static_cast<int>(std::thread::hardware_concurrency());
  if (threads <= 0) threads = 1;
  // Each worker's share of the per-member pool limit, rounded up.
  PoolOptions pool = options_.pool;
  if (pool.max_per_member > 0)
    pool.max_per_member = (pool.max_per_member + static_cast<size_t>(threads) - 1) / static_cast<size_t>(threads);
  for (int i = 0; i < threads; ++i) workers_.push_back(std::make_unique<Worker>(connections_, pool));
  if (pool.max_per_member > 0) {
    std::vector<std::weak_ptr<BackendPool>> pools;
    for (const auto& worker : workers_) pools.push_back(worker->pool());
    AddPoolMetrics(std::move(pools));
  }
}

Server::~Server() {
  for (auto& worker : workers_) worker->Join();
}

tcp::endpoint Server::Bind() {
  // Signals are caught from here on, before the address is announced: a
  // supervisor may signal as soon as it sees it, and one caught before Run()
  // waits for it is queued, not lost.
  signals_->add(SIGTERM);
  signals_->add(SIGINT);
  signals_->add(SIGHUP);
  acceptor_.open(options_.listen.protocol());
  acceptor_.set_option(tcp::acceptor::reuse_address(true));
  acceptor_.bind(options_.listen);
  acceptor_.listen(asio::socket_base::max_listen_connections);
  return acceptor_.local_endpoint();
}

void Server::Run() {
  WaitForSignal();
  asio::co_spawn(main_context_, AcceptLoop(), asio::detached);
  main_context_.run();
  IgnoreSignalsUntilExit();
  WaitForDrain();
  for (auto& worker : workers_) worker->Join();
  spdlog::info("stopped");
}

void Server::WaitForSignal() {
  signals_->async_wait([this](boost::system::error_code ec, int signal) {
    if (ec) return;
    if (signal == SIGHUP) {
      spdlog::info("received SIGHUP: reloading");
      if (options_.on_sighup) options_.on_sighup();
      WaitForSignal();
      return;
    }
    spdlog::info("received signal {}: draining", signal);
    BeginDrain();
  });
}

// Stopping already: a further signal must not kill the process before it
// exits, or a drained remold exits "killed by SIGTERM" instead of 0. The
// signals are ignored from now on, and the signal set is never destroyed:
// destroying (or clearing) it restores the default action, which would
// leave an instant before exit where a signal kills.
void Server::IgnoreSignalsUntilExit() {
  for (int signal : {SIGTERM, SIGINT, SIGHUP}) std::signal(signal, SIG_IGN);
  static_cast<void>(signals_.release());  // left to the end of the process, on purpose
}

void Server::Stop() {
  asio::post(main_context_, [this] { BeginDrain(); });
}

awaitable<void> Server::AcceptLoop() {
  size_t next_worker = 0;
  while (!draining_) {
    Worker& worker = *workers_[next_worker];
    next_worker = (next_worker + 1) % workers_.size();
    boost::system::error_code ec;
    Socket socket = co_await acceptor_.async_accept(
        worker.context(), asio::redirect_error(use_awaitable, ec));
    if (ec) {
      if (draining_) break;
      spdlog::warn("accept failed: {}", ec.message());
      // Out of file descriptors (or memory) the listening socket stays ready:
      // pause instead of spinning; sessions that end free what is needed.
      SteadyTimer pause(main_context_, std::chrono::milliseconds(100));
      co_await pause.async_wait(asio::redirect_error(use_awaitable, ec));
      continue;
    }
    if (!connections_.TryAcquire()) {  // past max_connections: an error, then a clean close
      GlobalMetrics().connections_refused.Add();
      // On the worker's thread, as every use of its sockets (its io_context).
      asio::post(worker.context(), [socket = std::move(socket), &policy = options_.policy]() mutable {
        RefuseConnection(std::move(socket), policy);
      });
      continue;
    }
    uint64_t id = next_session_id_.fetch_add(1);
    auto session = std::make_shared<Session>(
        std::move(socket),
        Session::Shared{options_.backend, *options_.rules, ensured_, options_.policy,
                        options_.slow_operation, options_.topology.get(), &pins_, options_.client_compression,
                        &heavy_work_, worker.pool()},
        id);
    asio::post(worker.context(), [&worker, session] { worker.Start(session); });
  }
}

void Server::BeginDrain() {
  if (draining_.exchange(true)) return;
  if (options_.on_drain) options_.on_drain();
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  if (signals_) signals_->cancel(ignored);
  for (auto& worker : workers_) worker->Drain();
}

void Server::WaitForDrain() {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + options_.drain_timeout;
  auto active = [this] {
    uint64_t total = 0;
    for (const auto& worker : workers_) total += worker->active();
    return total;
  };
  while (active() > 0 && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (uint64_t left = active()) {
    spdlog::warn("drain timeout: closing {} connection(s) with requests in flight", left);
    for (auto& worker : workers_) worker->Abort();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace remold
