#include "proxy/metrics.h"

#include <bson/bson.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "proxy/wire/reply_errors.h"
#include "proxy/wire/wire_format.h"

namespace remold {
namespace {

// Command names counted by name; every other one is "other" (slot 0). The
// label set stays bounded whatever clients send.
constexpr std::string_view kCommands[] = {
    "other",
    // CRUD and cursors
    "find", "insert", "update", "delete", "findAndModify", "findandmodify", "aggregate",
    "getMore", "killCursors", "count", "distinct", "mapReduce", "bulkWrite", "explain",
    // handshake, auth, sessions, transactions
    "hello", "isMaster", "ismaster", "ping", "buildInfo", "buildinfo", "saslStart",
    "saslContinue", "authenticate", "logout", "getnonce", "connectionStatus", "whatsmyuri",
    "endSessions", "startSession", "refreshSessions", "killSessions", "killAllSessions",
    "commitTransaction", "abortTransaction", "getLastError",
    // collections, indexes, databases
    "create", "drop", "dropDatabase", "createIndexes", "dropIndexes", "listIndexes",
    "listCollections", "listDatabases", "renameCollection", "collMod", "collStats", "dbStats",
    "dataSize", "validate", "compact", "reIndex",
    // diagnostics and administration
    "serverStatus", "hostInfo", "getParameter", "setParameter", "getCmdLineOpts", "getLog",
    "currentOp", "killOp", "listCommands", "replSetGetStatus", "getFreeMonitoringStatus",
    "top", "profile", "features", "lockInfo", "shardCollection", "enableSharding",
    "atlasVersion", "getDefaultRWConcern", "setDefaultRWConcern", "fsync", "shutdown",
};
static_assert(std::size(kCommands) <= kMaxCommandSlots);

// Command name -> slot: an open-addressing table built at compile time, so
// a lookup is a short hash and one or two compares.
constexpr size_t kCommandTableSize = 256;  // a power of two, > 2x the names

constexpr uint32_t HashName(std::string_view name) {
  uint32_t hash = 2166136261u;  // FNV-1a
  for (char c : name) hash = (hash ^ static_cast<uint8_t>(c)) * 16777619u;
  return hash;
}

constexpr std::array<uint8_t, kCommandTableSize> BuildCommandTable() {
  std::array<uint8_t, kCommandTableSize> table{};  // 0: empty (slot 0 is "other")
  for (size_t slot = 1; slot < std::size(kCommands); ++slot) {
    size_t at = HashName(kCommands[slot]) & (kCommandTableSize - 1);
    while (table[at] != 0) at = (at + 1) & (kCommandTableSize - 1);
    table[at] = static_cast<uint8_t>(slot);
  }
  return table;
}

constexpr std::array<uint8_t, kCommandTableSize> kCommandTable = BuildCommandTable();

constexpr std::string_view kConnectionErrors[] = {
    "backend_unreachable", "backend_lost", "bad_message", "message_too_large", "tls_handshake",
    "internal"};
static_assert(std::size(kConnectionErrors) == static_cast<size_t>(ConnectionError::kCount));

std::atomic<uint64_t> next_generation{1};

std::optional<int32_t> CodeOf(const bson_iter_t& error_doc) {
  if (!BSON_ITER_HOLDS_DOCUMENT(&error_doc)) return std::nullopt;
  bson_iter_t it;
  bson_iter_t copy = error_doc;
  if (!bson_iter_recurse(&copy, &it) || !bson_iter_find(&it, "code")) return std::nullopt;
  if (!BSON_ITER_HOLDS_NUMBER(&it)) return std::nullopt;
  return static_cast<int32_t>(bson_iter_as_int64(&it));
}

}  // namespace

size_t CommandSlot(std::string_view command) {
  for (size_t at = HashName(command) & (kCommandTableSize - 1);; at = (at + 1) & (kCommandTableSize - 1)) {
    const uint8_t slot = kCommandTable[at];
    if (slot == 0) return 0;
    if (kCommands[slot] == command) return slot;
  }
}

std::string_view CommandSlotName(size_t slot) {
  return slot < std::size(kCommands) ? kCommands[slot] : kCommands[0];
}

size_t CommandSlotCount() { return std::size(kCommands); }

std::string_view ConnectionErrorName(ConnectionError error) {
  return kConnectionErrors[static_cast<size_t>(error)];
}

// Rules by name, sorted; replaced whole when a new name is seen.
struct Metrics::RuleTable {
  std::vector<std::pair<std::string_view, RuleMetrics*>> sorted;

  RuleMetrics* Find(std::string_view name) const {
    auto it = std::lower_bound(sorted.begin(), sorted.end(), name,
                               [](const auto& entry, std::string_view n) { return entry.first < n; });
    return it != sorted.end() && it->first == name ? it->second : nullptr;
  }
};

Metrics::Metrics() : generation_(next_generation.fetch_add(1)) {
  auto table = std::make_unique<const RuleTable>();
  rule_table_.store(table.get(), std::memory_order_release);
  rule_tables_.push_back(std::move(table));
}

Metrics::~Metrics() = default;

MetricsShard& Metrics::NewShard() {
  std::lock_guard lock(shards_mutex_);
  shards_.push_back(std::make_unique<MetricsShard>());
  return *shards_.back();
}

MetricsShard& Metrics::LocalShard() {
  struct Cached {
    uint64_t generation = 0;
    MetricsShard* shard = nullptr;
  };
  thread_local Cached cached;
  if (cached.generation != generation_) cached = {generation_, &NewShard()};
  return *cached.shard;
}

RuleMetrics& Metrics::ForRule(std::string_view rule) {
  if (RuleMetrics* found = rule_table_.load(std::memory_order_acquire)->Find(rule)) return *found;
  std::lock_guard lock(rules_mutex_);
  const RuleTable* current = rule_table_.load(std::memory_order_acquire);
  if (RuleMetrics* found = current->Find(rule)) return *found;
  rules_.push_back(std::make_unique<RuleMetrics>(std::string(rule)));
  RuleMetrics* added = rules_.back().get();
  auto table = std::make_unique<RuleTable>(*current);
  table->sorted.emplace_back(added->name, added);
  std::sort(table->sorted.begin(), table->sorted.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  // Readers may still hold the old table: it is kept until the registry goes.
  rule_table_.store(table.get(), std::memory_order_release);
  rule_tables_.push_back(std::move(table));
  return *added;
}

void Metrics::CountError(int32_t code) {
  std::lock_guard lock(errors_mutex_);
  auto it = errors_by_code_.find(code);
  if (it != errors_by_code_.end()) {
    ++it->second;
  } else if (errors_by_code_.size() < kMaxErrorCodes) {
    errors_by_code_.emplace(code, 1);
  } else {
    ++errors_other_;
  }
}

void Metrics::CountErrorWithoutCode() {
  std::lock_guard lock(errors_mutex_);
  ++errors_without_code_;
}

bool Metrics::CountReplyErrors(std::span<const uint8_t> document) {
  return CountScannedReplyErrors(wire::ScanReplyErrors(document));
}

bool Metrics::CountScannedReplyErrors(const std::optional<wire::ReplyErrors>& found) {
  if (!found) return false;
  // The rare error arrays are read with libbson.
  const std::span<const uint8_t> write_errors = found->write_errors;
  const std::span<const uint8_t> write_concern_error = found->write_concern_error;
  bson_t doc;
  if (!write_errors.empty() && bson_init_static(&doc, write_errors.data(), write_errors.size())) {
    bson_iter_t it;
    if (bson_iter_init(&it, &doc)) {
      while (bson_iter_next(&it)) {
        if (auto c = CodeOf(it)) CountError(*c);
        else CountErrorWithoutCode();
      }
    }
  }
  if (!write_concern_error.empty() &&
      bson_init_static(&doc, write_concern_error.data(), write_concern_error.size())) {
    bson_iter_t it;
    if (bson_iter_init_find(&it, &doc, "code") && BSON_ITER_HOLDS_NUMBER(&it)) {
      CountError(static_cast<int32_t>(bson_iter_as_int64(&it)));
    } else {
      CountErrorWithoutCode();
    }
  }
  if (found->failed) {
    if (found->code) CountError(*found->code);
    else CountErrorWithoutCode();
  }
  return found->failed;
}

void Metrics::AddCollector(Collector collector) { collectors_.push_back(std::move(collector)); }

void Metrics::AddRefresher(std::function<void()> refresher) {
  refreshers_.push_back(std::move(refresher));
}

std::string Metrics::Render() const {
  using prometheus::HistogramSnapshot;
  for (const auto& refresher : refreshers_) refresher();
  uint64_t opened = 0, closed = 0, received = 0, sent = 0, slow = 0, backend_sent = 0, backend_received = 0;
  std::array<uint64_t, kRouteModes * kRouteMemberKinds> routes{};
  std::array<uint64_t, kMaxCommandSlots> requests{};
  std::array<uint64_t, static_cast<size_t>(ConnectionError::kCount)> connection_errors{};
  HistogramSnapshot roundtrip;
  {
    std::lock_guard lock(shards_mutex_);
    for (const auto& shard : shards_) {
      // Closed before opened: a shard's writer opens a session before it
      // closes it, so the open count never goes negative.
      closed += shard->connections_closed.Get();
      opened += shard->connections_opened.Get();
      for (size_t i = 0; i < requests.size(); ++i) requests[i] += shard->requests[i].Get();
      received += shard->bytes_received.Get();
      sent += shard->bytes_sent.Get();
      backend_sent += shard->backend_bytes_sent.Get();
      backend_received += shard->backend_bytes_received.Get();
      shard->backend_roundtrip.AddTo(roundtrip);
      for (size_t i = 0; i < connection_errors.size(); ++i)
        connection_errors[i] += shard->connection_errors[i].Get();
      slow += shard->slow_operations.Get();
      for (size_t i = 0; i < routes.size(); ++i) routes[i] += shard->routes[i].Get();
    }
  }

  prometheus::TextWriter out;
  out.Family("remold_connections_open", "gauge", "Client connections open now.");
  out.Sample("remold_connections_open", {}, opened >= closed ? opened - closed : 0);
  out.Family("remold_connections_total", "counter", "Client connections accepted.");
  out.Sample("remold_connections_total", {}, opened);
  out.Family("remold_connections_refused_total", "counter",
             "Client connections refused at once because --max-connections were open.");
  out.Sample("remold_connections_refused_total", {}, connections_refused.Get());
  out.Family("remold_connection_errors_total", "counter",
             "Client connections remold closed because of an error, by reason.");
  for (size_t i = 0; i < connection_errors.size(); ++i)
    out.Sample("remold_connection_errors_total",
               {{"reason", kConnectionErrors[i]}}, connection_errors[i]);

  out.Family("remold_requests_total", "counter",
             "Client requests, by command name (unknown names count as \"other\").");
  for (size_t i = 0; i < CommandSlotCount(); ++i) {
    if (requests[i] != 0)
      out.Sample("remold_requests_total", {{"command", kCommands[i]}}, requests[i]);
  }

  out.Family("remold_errors_total", "counter",
             "Errors sent to clients, by MongoDB error code: command errors (ok: 0), "
             "write errors and write concern errors.");
  {
    std::lock_guard lock(errors_mutex_);
    for (const auto& [code, count] : errors_by_code_) {
      std::string label = std::to_string(code);
      out.Sample("remold_errors_total", {{"code", label}}, count);
    }
    if (errors_without_code_ != 0)
      out.Sample("remold_errors_total", {{"code", "none"}}, errors_without_code_);
    if (errors_other_ != 0) out.Sample("remold_errors_total", {{"code", "other"}}, errors_other_);
  }

  out.Family("remold_bytes_received_total", "counter",
             "Bytes of wire messages received from clients (as sent, compressed or not).");
  out.Sample("remold_bytes_received_total", {}, received);
  out.Family("remold_bytes_sent_total", "counter",
             "Bytes of wire messages sent to clients (as sent, compressed or not).");
  out.Sample("remold_bytes_sent_total", {}, sent);
  out.Family("remold_backend_bytes_sent_total", "counter",
             "Bytes of wire messages sent to the backend (as sent: compressed when the backend URI's "
             "compressors= and the backend agreed).");
  out.Sample("remold_backend_bytes_sent_total", {}, backend_sent);
  out.Family("remold_backend_bytes_received_total", "counter",
             "Bytes of wire messages received from the backend (as received, compressed or not).");
  out.Sample("remold_backend_bytes_received_total", {}, backend_received);

  out.Family("remold_backend_roundtrip_seconds", "histogram",
             "Backend round trips: from sending a command to the backend to its (first) reply.");
  out.Histogram("remold_backend_roundtrip_seconds", {}, roundtrip);

  out.Family("remold_slow_operations_total", "counter",
             "Requests slower than --slow-op-ms (0 while the slow-operation log is off).");
  out.Sample("remold_slow_operations_total", {}, slow);

  // In the order of ReadPreference::Mode and MemberKind.
  static constexpr std::array<std::string_view, kRouteModes> kModes = {
      "primary", "primaryPreferred", "secondary", "secondaryPreferred", "nearest"};
  static constexpr std::array<std::string_view, kRouteMemberKinds> kMembers = {
      "unknown", "standalone", "mongos", "primary", "secondary", "other"};
  out.Family("remold_routes_total", "counter",
             "Requests sent to a monitored backend, by the read preference asked for (primary "
             "when none) and the kind of member that served them.");
  for (size_t mode = 0; mode < kRouteModes; ++mode)
    for (size_t member = 0; member < kRouteMemberKinds; ++member)
      if (uint64_t count = routes[mode * kRouteMemberKinds + member])
        out.Sample("remold_routes_total",
                   {{"read_preference", kModes[mode]}, {"member", kMembers[member]}},
                   count);

  const RuleTable* table = rule_table_.load(std::memory_order_acquire);
  out.Family("remold_rewrites_total", "counter", "Requests rewritten, by rule.");
  for (const auto& [name, rule] : table->sorted)
    out.Sample("remold_rewrites_total", {{"rule", name}}, rule->rewrites.Get());
  out.Family("remold_rewrite_errors_total", "counter",
             "Rewritten requests that failed, by rule: the client got a command error, the "
             "backend was lost, or a follow-up write failed (logged as a warning).");
  for (const auto& [name, rule] : table->sorted)
    out.Sample("remold_rewrite_errors_total", {{"rule", name}}, rule->errors.Get());
  out.Family("remold_documents_returned_as_stored_total", "counter",
             "Documents a rule's read returned as they are stored, because they are not in its form and "
             "cannot be turned into it (an attribute rule's pair array that is not one), by rule.");
  for (const auto& [name, rule] : table->sorted)
    out.Sample("remold_documents_returned_as_stored_total", {{"rule", name}}, rule->returned_as_stored.Get());
  out.Family("remold_rewrite_seconds", "histogram",
             "Time to serve a rewritten request, by rule: every backend command of the plan "
             "and the shaping of the reply.");
  for (const auto& [name, rule] : table->sorted) {
    HistogramSnapshot snapshot;
    rule->seconds.AddTo(snapshot);
    out.Histogram("remold_rewrite_seconds", {{"rule", name}}, snapshot);
  }

  for (const Collector& collector : collectors_) collector(out);
  return out.Take();
}

Metrics& GlobalMetrics() {
  static Metrics* metrics = new Metrics();
  return *metrics;
}

std::span<const uint8_t> OpMsgBody(std::span<const uint8_t> message) {
  using namespace wire;
  if (message.size() < static_cast<size_t>(kHeaderSize) + 5) return {};
  MessageHeader header = ReadHeader(message);
  if (header.op_code != static_cast<int32_t>(OpCode::kMsg) ||
      static_cast<size_t>(header.message_length) != message.size())
    return {};
  size_t end = message.size();
  if (LoadUint32(message.data() + kHeaderSize) & msg_flags::kChecksumPresent) end -= 4;
  size_t at = kHeaderSize + 4;
  while (at < end) {
    const uint8_t kind = message[at++];
    if (at + 4 > end) return {};
    const int32_t size = LoadInt32(message.data() + at);
    if (size < 5 || static_cast<size_t>(size) > end - at) return {};
    if (kind == 0) return message.subspan(at, static_cast<size_t>(size));
    if (kind != 1) return {};
    at += static_cast<size_t>(size);
  }
  return {};
}

}  // namespace remold
