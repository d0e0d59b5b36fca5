#include "proxy/routing/topology_monitor.h"

#include <mongoc/mongoc.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>

#include "common/doc.h"
#include "proxy/routing/own_connection_uri.h"

namespace remold {
namespace {

// libmongoc is initialised once per process; its log goes to remold's.
void EnsureMongoc() {
  static const bool initialised = [] {
    // Its shared-memory counters file: common/driver_counters_segment.cc.
    mongoc_init();
    mongoc_log_set_handler(
        [](mongoc_log_level_t level, const char* domain, const char* message, void*) {
          if (level <= MONGOC_LOG_LEVEL_WARNING)
            spdlog::warn("backend monitor: {}: {}", domain, message);
          else
            spdlog::trace("backend monitor: {}: {}", domain, message);
        },
        nullptr);
    return true;
  }();
  (void)initialised;
}

int64_t MonotonicMicros() { return bson_get_monotonic_time(); }

std::string AddressOf(const mongoc_host_list_t* host) { return host->host_and_port; }

HostAndPort HostOf(const mongoc_host_list_t* host) { return HostAndPort{host->host, host->port}; }

// "host:port" ("[v6]:port"), as libmongoc writes host_and_port: host
// names in lower case.
std::string AddressText(const HostAndPort& host) {
  HostAndPort lower = host;
  std::transform(lower.host.begin(), lower.host.end(), lower.host.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return HostPortText(lower);
}

TopologyKind ParseTopologyKind(std::string_view type) {
  if (type == "Single") return TopologyKind::kSingle;
  if (type == "ReplicaSetNoPrimary") return TopologyKind::kReplicaSetNoPrimary;
  if (type == "ReplicaSetWithPrimary") return TopologyKind::kReplicaSetWithPrimary;
  if (type == "Sharded") return TopologyKind::kSharded;
  return TopologyKind::kUnknown;
}

MemberKind ParseMemberKind(std::string_view type) {
  if (type == "Standalone") return MemberKind::kStandalone;
  if (type == "Mongos") return MemberKind::kMongos;
  if (type == "RSPrimary") return MemberKind::kPrimary;
  if (type == "RSSecondary") return MemberKind::kSecondary;
  if (type == "Unknown" || type == "PossiblePrimary") return MemberKind::kUnknown;
  return MemberKind::kOther;  // arbiters, ghosts, RSOther, load balancers
}

// lastWrite.lastWriteDate of a hello reply, ms since the epoch; 0: none.
int64_t LastWriteMs(const bson_t* hello) {
  std::optional<bson_iter_t> date = FindPath(hello, "lastWrite.lastWriteDate");
  return date && BSON_ITER_HOLDS_DATE_TIME(&*date) ? bson_iter_date_time(&*date) : 0;
}

std::vector<std::pair<std::string, std::string>> TagsOf(const bson_t* hello) {
  std::vector<std::pair<std::string, std::string>> tags;
  if (std::optional<bson_iter_t> found = Find(hello, "tags"); found && BSON_ITER_HOLDS_DOCUMENT(&*found))
    ForEachChild(*found, [&](std::string_view key, const bson_iter_t& value) {
      if (BSON_ITER_HOLDS_UTF8(&value)) tags.emplace_back(std::string(key), bson_iter_utf8(&value, nullptr));
    });
  return tags;
}

bool SaysWritablePrimary(const bson_t* hello) {
  return FindBool(hello, "isWritablePrimary").value_or(false) || FindBool(hello, "ismaster").value_or(false);
}

// One line for the log: "ReplicaSetWithPrimary rs0: a:1 primary, b:2 secondary, c:3 unknown (...)".
std::string Summary(const TopologyView& view) {
  std::string text(TopologyKindName(view.kind));
  if (!view.set_name.empty()) text += " " + view.set_name;
  text += ":";
  bool first = true;
  for (const Member& member : view.members) {
    text += first ? " " : ", ";
    first = false;
    text += member.address + " " + std::string(MemberKindName(member.kind));
    if (!member.error.empty()) text += " (" + member.error + ")";
  }
  return text;
}

}  // namespace

TopologyMonitor::TopologyMonitor(const BackendOptions& backend) : backend_(backend) {
  std::lock_guard lock(mutex_);
  for (const HostAndPort& host : backend_.hosts) RecordLocked(AddressText(host), host);
  PublishLocked();
}

TopologyMonitor::~TopologyMonitor() {
  if (mongoc_client_t* client = client_.exchange(nullptr)) mongoc_client_pool_push(pool_, client);
  if (pool_) mongoc_client_pool_destroy(pool_);  // stops and joins the monitor threads
}

bool TopologyMonitor::Start(std::string& error) {
  EnsureMongoc();
  MongocUriPtr uri =
      OwnConnectionUri(backend_, BackendIdentity{}, backend_.app_name.empty() ? "remold" : backend_.app_name, error);
  if (!uri) return false;
  mongoc_uri_set_option_as_int32(uri.get(), MONGOC_URI_HEARTBEATFREQUENCYMS,
                                 static_cast<int32_t>(backend_.heartbeat.count()));
  bson_error_t bson_error;
  pool_ = mongoc_client_pool_new_with_error(uri.get(), &bson_error);
  if (!pool_) {
    error = bson_error.message;
    return false;
  }
  mongoc_client_pool_set_error_api(pool_, MONGOC_ERROR_API_VERSION_2);
  mongoc_apm_callbacks_t* callbacks = mongoc_apm_callbacks_new();
  mongoc_apm_set_topology_changed_cb(callbacks, &TopologyMonitor::OnTopologyChanged);
  mongoc_apm_set_server_heartbeat_succeeded_cb(callbacks, &TopologyMonitor::OnHeartbeatSucceeded);
  mongoc_apm_set_server_heartbeat_failed_cb(callbacks, &TopologyMonitor::OnHeartbeatFailed);
  mongoc_client_pool_set_apm_callbacks(pool_, callbacks, this);
  mongoc_apm_callbacks_destroy(callbacks);
  client_.store(mongoc_client_pool_pop(pool_), std::memory_order_release);  // the monitor threads start here
  return true;
}

std::shared_ptr<const TopologyView> TopologyMonitor::View() const {
  std::lock_guard lock(mutex_);
  return view_;
}

std::optional<std::chrono::steady_clock::time_point> TopologyMonitor::no_primary_since() const {
  std::lock_guard lock(mutex_);
  return no_primary_since_;
}

void TopologyMonitor::ReportNotPrimary(std::string_view address) {
  std::lock_guard lock(mutex_);
  auto found = members_.find(std::string(address));
  if (found == members_.end() || found->second.member.kind != MemberKind::kPrimary) return;
  if (found->second.not_primary_since_us != 0) return;
  found->second.not_primary_since_us = MonotonicMicros();
  spdlog::warn("backend {} answered as a former primary; waiting for the monitor to find the primary",
               address);
  PublishLocked();
}

TopologyMonitor::MemberRecord& TopologyMonitor::RecordLocked(const std::string& address,
                                                             const HostAndPort& host) {
  auto [it, added] = members_.try_emplace(address);
  if (added) {
    it->second.member.address = address;
    it->second.member.host = host;
  }
  return it->second;
}

void TopologyMonitor::OnTopologyChanged(const mongoc_apm_topology_changed_t* event) {
  auto* self = static_cast<TopologyMonitor*>(mongoc_apm_topology_changed_get_context(event));
  const mongoc_topology_description_t* description =
      mongoc_apm_topology_changed_get_new_description(event);
  size_t count = 0;
  mongoc_server_description_t** servers = mongoc_topology_description_get_servers(description, &count);
  std::lock_guard lock(self->mutex_);
  self->kind_ = ParseTopologyKind(mongoc_topology_description_type(description));
  // Members the description no longer lists are gone (removed from the set).
  std::map<std::string, MemberRecord> previous;
  previous.swap(self->members_);
  for (size_t i = 0; i < count; ++i) {
    const mongoc_host_list_t* host = mongoc_server_description_host(servers[i]);
    MemberRecord& record = self->RecordLocked(AddressOf(host), HostOf(host));
    if (auto old = previous.find(record.member.address); old != previous.end()) record = old->second;
    const MemberKind kind = ParseMemberKind(mongoc_server_description_type(servers[i]));
    // The monitor has news of it: what it says replaces a report.
    if (kind != record.member.kind) record.not_primary_since_us = 0;
    record.member.kind = kind;
    const bson_t* hello = mongoc_server_description_hello_response(servers[i]);
    record.member.tags = TagsOf(hello);
    if (int64_t written = LastWriteMs(hello)) record.member.last_write_ms = written;
    // Both clocks are libmongoc's monotonic one (bson_get_monotonic_time).
    record.member.last_update_us =
        std::max(record.member.last_update_us, mongoc_server_description_last_update_time(servers[i]));
    if (kind != MemberKind::kUnknown) record.member.error.clear();
    int64_t rtt_ms = mongoc_server_description_round_trip_time(servers[i]);
    if (rtt_ms >= 0) record.member.round_trip = std::chrono::milliseconds(rtt_ms);
    if (!self->backend_.replica_set.empty()) self->set_name_ = self->backend_.replica_set;
    else if (std::optional<std::string> name = FindString(hello, "setName")) self->set_name_ = *name;
  }
  // libmongoc lists only the servers it knows the type of. The others stay
  // listed, unknown, unless a primary's member list leaves them out.
  std::vector<std::string> members_of_set;
  for (size_t i = 0; i < count; ++i) {
    if (std::string_view(mongoc_server_description_type(servers[i])) != "RSPrimary") continue;
    const bson_t* hello = mongoc_server_description_hello_response(servers[i]);
    for (const char* list : {"hosts", "passives", "arbiters"})
      if (std::optional<bson_iter_t> hosts = Find(hello, list); hosts && BSON_ITER_HOLDS_ARRAY(&*hosts))
        ForEachChild(*hosts, [&](std::string_view, const bson_iter_t& host) {
          if (BSON_ITER_HOLDS_UTF8(&host)) members_of_set.emplace_back(bson_iter_utf8(&host, nullptr));
        });
  }
  mongoc_server_descriptions_destroy_all(servers, count);
  for (auto& [address, record] : previous) {
    if (self->members_.count(address)) continue;
    if (!members_of_set.empty() &&
        std::find(members_of_set.begin(), members_of_set.end(), address) == members_of_set.end())
      continue;
    record.member.kind = MemberKind::kUnknown;
    self->members_.emplace(address, std::move(record));
  }
  self->PublishLocked();
}

void TopologyMonitor::OnHeartbeatSucceeded(const mongoc_apm_server_heartbeat_succeeded_t* event) {
  auto* self = static_cast<TopologyMonitor*>(mongoc_apm_server_heartbeat_succeeded_get_context(event));
  const mongoc_host_list_t* host = mongoc_apm_server_heartbeat_succeeded_get_host(event);
  const bson_t* reply = mongoc_apm_server_heartbeat_succeeded_get_reply(event);
  const int64_t now = MonotonicMicros();
  const int64_t started = now - mongoc_apm_server_heartbeat_succeeded_get_duration(event);
  // Round trips change without a topology change (libmongoc's round-trip
  // monitor measures them apart from the streamed hellos): read them here.
  std::vector<std::pair<std::string, int64_t>> round_trips;
  if (mongoc_client_t* client = self->client_.load(std::memory_order_acquire)) {
    size_t count = 0;
    mongoc_server_description_t** servers = mongoc_client_get_server_descriptions(client, &count);
    for (size_t i = 0; i < count; ++i)
      round_trips.emplace_back(AddressOf(mongoc_server_description_host(servers[i])),
                               mongoc_server_description_round_trip_time(servers[i]));
    mongoc_server_descriptions_destroy_all(servers, count);
  }
  std::lock_guard lock(self->mutex_);
  for (const auto& [address, rtt_ms] : round_trips) {
    auto member = self->members_.find(address);
    if (member != self->members_.end() && rtt_ms >= 0) member->second.member.round_trip = std::chrono::milliseconds(rtt_ms);
  }
  auto found = self->members_.find(AddressOf(host));
  if (found == self->members_.end()) return;
  MemberRecord& record = found->second;
  record.heard = true;
  record.member.last_update_us = now;
  if (int64_t written = LastWriteMs(reply)) record.member.last_write_ms = written;
  // A check begun after a report, that finds the member still primary,
  // ends the report.
  if (record.not_primary_since_us && started > record.not_primary_since_us && SaysWritablePrimary(reply))
    record.not_primary_since_us = 0;
  self->PublishLocked();
}

void TopologyMonitor::OnHeartbeatFailed(const mongoc_apm_server_heartbeat_failed_t* event) {
  auto* self = static_cast<TopologyMonitor*>(mongoc_apm_server_heartbeat_failed_get_context(event));
  const mongoc_host_list_t* host = mongoc_apm_server_heartbeat_failed_get_host(event);
  bson_error_t error;
  mongoc_apm_server_heartbeat_failed_get_error(event, &error);
  std::lock_guard lock(self->mutex_);
  auto found = self->members_.find(AddressOf(host));
  if (found == self->members_.end()) return;
  found->second.heard = true;
  found->second.member.error = error.message;
  self->PublishLocked();
}

void TopologyMonitor::PublishLocked() {
  auto view = std::make_shared<TopologyView>();
  view->kind = kind_;
  view->set_name = set_name_;
  view->heartbeat = backend_.heartbeat;
  // Scanned once every seed has been checked (a heartbeat ended, either
  // way), or a server has been found; for good (a seed the set names
  // otherwise leaves the list).
  if (!scanned_) {
    scanned_ = std::any_of(members_.begin(), members_.end(),
                           [](const auto& entry) { return entry.second.member.kind != MemberKind::kUnknown; });
    bool all_heard = true;
    for (const HostAndPort& seed : backend_.hosts) {
      auto found = members_.find(AddressText(seed));
      all_heard = all_heard && found != members_.end() && found->second.heard;
    }
    scanned_ = scanned_ || all_heard;
  }
  view->scanned = scanned_;
  bool reported = false;
  for (const auto& [address, record] : members_) {
    Member member = record.member;
    if (record.not_primary_since_us && member.kind == MemberKind::kPrimary) {
      member.kind = MemberKind::kUnknown;
      member.error = "answered as a former primary";
      reported = true;
    }
    view->members.push_back(std::move(member));
  }
  if (reported && view->kind == TopologyKind::kReplicaSetWithPrimary)
    view->kind = TopologyKind::kReplicaSetNoPrimary;

  const bool replica_set = view->kind == TopologyKind::kReplicaSetWithPrimary ||
                           view->kind == TopologyKind::kReplicaSetNoPrimary;
  const Member* primary = view->primary();
  const std::string primary_address = primary ? primary->address : "";
  // last_primary_ is the last primary seen: a step-down and an election
  // elsewhere are one change.
  if (!primary_address.empty() && primary_address != last_primary_) {
    if (!last_primary_.empty()) primary_changes_.fetch_add(1);
    last_primary_ = primary_address;
  }
  if (replica_set && !primary) {
    if (!no_primary_since_) no_primary_since_ = std::chrono::steady_clock::now();
  } else {
    no_primary_since_.reset();
  }
  if (std::string summary = Summary(*view); summary != last_logged_) {
    spdlog::info("backend topology: {}", summary);
    last_logged_ = std::move(summary);
  }
  view_ = std::move(view);
  version_.fetch_add(1, std::memory_order_release);
}

}  // namespace remold
