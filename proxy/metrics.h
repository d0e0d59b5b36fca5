// The proxy's metrics, rendered for Prometheus at /metrics.
//
// Cost on the request path: a session holds its worker thread's shard (one
// per thread, cache-line aligned) and bumps single-writer counters in it:
// plain loads and stores, no locks, no allocation. Requests are counted by
// command through a fixed table of known command names (anything else is
// "other"), found once per request by a hash of the name. Backend latency is
// one steady_clock pair per round trip. Error codes go to a small bounded
// map behind a lock, touched only when a reply carries an error. Rewrites
// are counted per rule in objects found through a copy-on-write table
// (lock-free to read; the lock is taken only the first time a rule name is
// seen), with shared atomic counters: a rewrite costs far more than they do.
//
// A scrape sums the shards; it never stops a worker.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "proxy/prometheus.h"
#include "proxy/wire/reply_errors.h"

namespace remold {

// Known command names (requests_total{command}); slot 0 is "other".
size_t CommandSlot(std::string_view command);
std::string_view CommandSlotName(size_t slot);
size_t CommandSlotCount();
inline constexpr size_t kMaxCommandSlots = 96;

// Why remold closed a client connection itself (connection_errors_total{reason}).
enum class ConnectionError : uint8_t {
  kBackendUnreachable,  // no backend host answered
  kBackendLost,         // the backend link dropped or sent garbage mid-request
  kBadMessage,          // the client's framing could not be trusted
  kMessageTooLarge,     // a message above --max-message-size (answered, then closed)
  kTlsHandshake,        // the client's TLS handshake failed or timed out
  kInternal,            // an unexpected exception ended the session
  kCount
};
std::string_view ConnectionErrorName(ConnectionError error);

// Routed requests (routes_total{read_preference, member}): the read
// preference modes and member kinds of proxy/routing/server_selection.h and
// proxy/routing/topology_view.h, by their enum values.
inline constexpr size_t kRouteModes = 5;
inline constexpr size_t kRouteMemberKinds = 6;

// Everything one worker thread writes. Read by scrapes on another thread.
struct alignas(64) MetricsShard {
  prometheus::ShardCounter connections_opened;
  prometheus::ShardCounter connections_closed;
  std::array<prometheus::ShardCounter, kMaxCommandSlots> requests;
  prometheus::ShardCounter bytes_received;
  prometheus::ShardCounter bytes_sent;
  prometheus::ShardCounter backend_bytes_sent;
  prometheus::ShardCounter backend_bytes_received;
  prometheus::LatencyHistogram<prometheus::ShardCounter> backend_roundtrip;
  std::array<prometheus::ShardCounter, static_cast<size_t>(ConnectionError::kCount)>
      connection_errors;
  prometheus::ShardCounter slow_operations;
  std::array<prometheus::ShardCounter, kRouteModes * kRouteMemberKinds> routes;

  void CountRoute(size_t mode, size_t member_kind) {
    if (mode < kRouteModes && member_kind < kRouteMemberKinds) routes[mode * kRouteMemberKinds + member_kind].Add(1);
  }
  void CountRequest(std::string_view command) { requests[CommandSlot(command)].Add(1); }
  void CountConnectionError(ConnectionError error) {
    connection_errors[static_cast<size_t>(error)].Add(1);
  }
};

// One rule's rewrites. Written by every worker (shared atomics).
struct RuleMetrics {
  explicit RuleMetrics(std::string rule_name) : name(std::move(rule_name)) {}
  const std::string name;
  prometheus::SharedCounter rewrites;
  prometheus::SharedCounter errors;
  // Documents a read returned as they are stored, not in the rule's form
  // (ShapedReply::returned_as_stored).
  prometheus::SharedCounter returned_as_stored;
  prometheus::LatencyHistogram<prometheus::SharedCounter> seconds;
};

class Metrics {
 public:
  Metrics();
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // Connections refused at accept (max_connections), from the accepting thread.
  prometheus::SharedCounter connections_refused;

  // A shard for one writer thread; it lives as long as this registry.
  MetricsShard& NewShard();
  // The calling thread's shard of this registry, made on first use.
  MetricsShard& LocalShard();

  // The counters of a rule, made the first time its name is seen. Safe from
  // any thread; the reference stays valid as long as this registry.
  RuleMetrics& ForRule(std::string_view rule);

  // errors_total{code}: call once per error a client is sent. At most
  // kMaxErrorCodes distinct codes are kept; more count as code "other".
  void CountError(int32_t code);
  void CountErrorWithoutCode();
  static constexpr size_t kMaxErrorCodes = 256;

  // Scans one reply document (the body a client is sent) and counts its
  // errors: the command error (ok is not 1), each writeErrors entry, a
  // writeConcernError. Returns whether the command failed (ok is not 1).
  bool CountReplyErrors(std::span<const uint8_t> document);
  // The same for a reply already scanned (a malformed one counts nothing).
  bool CountScannedReplyErrors(const std::optional<wire::ReplyErrors>& found);

  // Extra families rendered after the proxy's own (readiness, reloads...).
  // Register before scrapes begin; each runs on the scraping thread.
  using Collector = std::function<void(prometheus::TextWriter&)>;
  void AddCollector(Collector collector);
  // Called at the start of every Render(), before anything is read: e.g. to
  // register the rules in force, so their series exist before their first
  // rewrite. Same rules as collectors.
  void AddRefresher(std::function<void()> refresher);

  // The whole exposition, Prometheus text format 0.0.4.
  std::string Render() const;

 private:
  struct RuleTable;

  const uint64_t generation_;
  mutable std::mutex shards_mutex_;
  std::vector<std::unique_ptr<MetricsShard>> shards_;

  mutable std::mutex errors_mutex_;
  std::map<int32_t, uint64_t> errors_by_code_;
  uint64_t errors_other_ = 0;
  uint64_t errors_without_code_ = 0;

  std::atomic<const RuleTable*> rule_table_;
  mutable std::mutex rules_mutex_;
  std::vector<std::unique_ptr<RuleMetrics>> rules_;
  std::vector<std::unique_ptr<const RuleTable>> rule_tables_;  // current and retired

  std::vector<Collector> collectors_;
  std::vector<std::function<void()>> refreshers_;

  friend class MetricsTestPeer;
};

// The process's registry, used by the sessions and the /metrics endpoint.
// Never destroyed (worker threads may still count while the process exits).
Metrics& GlobalMetrics();

// The body of an OP_MSG message (its kind-0 section), or an empty span when
// the message is not an OP_MSG or is malformed. Reads only the framing.
std::span<const uint8_t> OpMsgBody(std::span<const uint8_t> message);

}  // namespace remold
