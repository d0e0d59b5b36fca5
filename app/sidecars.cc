#include "app/sidecars.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <utility>

#include "common/doc.h"
#include "tools/common/backend_client.h"

namespace remold {
namespace {

// Heartbeats older than this are deleted by whichever sidecar sees them.
constexpr int64_t kForgetMs = 3'600'000;
// Heartbeats between two sweeps of the forgotten ones.
constexpr int64_t kSweepEvery = 300;
// How often the wait between heartbeats looks whether the rules changed.
constexpr std::chrono::milliseconds kRulesPoll{100};

std::string RandomId() {
  std::random_device device;
  std::mt19937_64 bits(device());
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id;
  for (int i = 0; i < 12; ++i) id += kHex[bits() % 16];
  return id;
}

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "?";
  return name;
}

// How sidecar `forms` reads and writes `ns`: as it says, or plain.
NamespaceForms FormsFor(const std::vector<NamespaceForms>& forms, const std::string& ns) {
  for (const NamespaceForms& f : forms)
    if (f.ns.full() == ns) return f;
  return {};
}

bool Rules(const std::vector<NamespaceForms>& forms, const std::string& ns) {
  return std::any_of(forms.begin(), forms.end(), [&](const NamespaceForms& f) { return f.ns.full() == ns; });
}

// Whether a sidecar with `forms` reads what is written to `ns` in `written`.
bool Reads(const std::vector<NamespaceForms>& forms, const std::string& ns, const std::string& written) {
  if (!Rules(forms, ns)) return StoredAsWritten(written);
  const NamespaceForms f = FormsFor(forms, ns);
  return std::find(f.reads.begin(), f.reads.end(), written) != f.reads.end();
}

std::string Writes(const std::vector<NamespaceForms>& forms, const std::string& ns) {
  return Rules(forms, ns) ? FormsFor(forms, ns).writes : std::string(kPlainForm);
}

std::vector<std::string> ReadsOf(const std::vector<NamespaceForms>& forms, const std::string& ns) {
  if (!Rules(forms, ns)) return {std::string(kPlainForm) + " (and what is stored as written)"};
  return FormsFor(forms, ns).reads;
}

Doc FormsDoc(const NamespaceForms& forms) {
  Doc doc;
  AppendString(doc.mut(), "ns", forms.ns.full());
  AppendString(doc.mut(), "writes", forms.writes);
  std::vector<std::string> reads = forms.reads;
  bson_t array;
  bson_append_array_begin(doc.mut(), "reads", -1, &array);
  for (size_t i = 0; i < reads.size(); ++i)
    bson_append_utf8(&array, std::to_string(i).c_str(), -1, reads[i].c_str(), static_cast<int>(reads[i].size()));
  bson_append_array_end(doc.mut(), &array);
  return doc;
}

std::vector<NamespaceForms> FormsFromDoc(const bson_t* heartbeat) {
  std::vector<NamespaceForms> out;
  std::optional<bson_iter_t> list = Find(heartbeat, "forms");
  if (!list || !BSON_ITER_HOLDS_ARRAY(&*list)) return out;
  for (const Doc& entry : ArrayDocuments(*list)) {
    const std::string ns = FindString(entry.get(), "ns").value_or("");
    const size_t dot = ns.find('.');
    if (dot == std::string::npos) continue;
    NamespaceForms forms{{ns.substr(0, dot), ns.substr(dot + 1)}, FindString(entry.get(), "writes").value_or(""), {}};
    if (std::optional<bson_iter_t> reads = Find(entry.get(), "reads"); reads && BSON_ITER_HOLDS_ARRAY(&*reads)) {
      bson_iter_t it;
      bson_iter_recurse(&*reads, &it);
      while (bson_iter_next(&it))
        if (BSON_ITER_HOLDS_UTF8(&it)) forms.reads.emplace_back(bson_iter_utf8(&it, nullptr));
    }
    out.push_back(std::move(forms));
  }
  return out;
}

}  // namespace

std::vector<Disagreement> Disagreements(const SidecarForms& self, const std::vector<SidecarForms>& others) {
  std::vector<Disagreement> out;
  for (const SidecarForms& other : others) {
    std::set<std::string> namespaces;
    for (const NamespaceForms& f : self.forms) namespaces.insert(f.ns.full());
    for (const NamespaceForms& f : other.forms) namespaces.insert(f.ns.full());
    for (const std::string& ns : namespaces) {
      const std::string theirs = Writes(other.forms, ns);
      if (!Reads(self.forms, ns, theirs))
        out.push_back({ns, self.description, other.description, theirs, ReadsOf(self.forms, ns), true});
      const std::string mine = Writes(self.forms, ns);
      if (!Reads(other.forms, ns, mine))
        out.push_back({ns, other.description, self.description, mine, ReadsOf(other.forms, ns), false});
    }
  }
  return out;
}

std::vector<NamespaceForms> FormsOf(const RuleSet& rules) {
  std::vector<NamespaceForms> out;
  for (const Rule& rule : rules.rules())
    for (NamespaceForms& forms : rule.Forms()) out.push_back(std::move(forms));
  return out;
}

SidecarRegistry::SidecarRegistry(Options options, std::shared_ptr<RuleSetHolder> serving)
    : options_(std::move(options)),
      serving_(std::move(serving)),
      id_(RandomId()),
      description_(HostName() + " " + options_.listen + " (pid " + std::to_string(getpid()) + ")") {
  thread_ = std::thread([this] { Run(); });
}

SidecarRegistry::~SidecarRegistry() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

std::string SidecarRegistry::NotReadyReason() const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const Disagreement& d : current_)
    if (d.this_reads)
      return "sidecars: cannot read what " + d.writer + " writes to " + d.ns + " (its rules store it as '" +
             d.writes + "'): the sidecars of group '" + options_.group + "' run different rules";
  return "";
}

std::vector<Disagreement> SidecarRegistry::Current() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return current_;
}

size_t SidecarRegistry::Live() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return live_;
}

void SidecarRegistry::WaitForNextBeat(std::unique_lock<std::mutex>& lock,
                                      const std::shared_ptr<const RuleSet>& published) {
  // The next heartbeat is due after the interval, or as soon as the rules
  // in force change (a reload, adoption serving another way), so that the
  // others never judge this remold by what it served before.
  const auto due = std::chrono::steady_clock::now() + options_.interval;
  while (!stopping_ && std::chrono::steady_clock::now() < due && serving_->Load() == published)
    wake_.wait_for(lock, kRulesPoll, [this] { return stopping_; });
}

void SidecarRegistry::Run() {
  std::unique_ptr<BackendClient> client;
  std::shared_ptr<const RuleSet> published;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    lock.unlock();
    try {
      if (!client)
        client = std::make_unique<BackendClient>(options_.backend, options_.identity,
                                                 options_.backend.app_name.empty() ? "remold" : options_.backend.app_name);
      published = serving_->Load();
      Beat(*client);
      std::lock_guard<std::mutex> relock(mutex_);
      if (failing_) spdlog::info("sidecars: the registry {} answers again", options_.registry.full());
      failing_ = false;
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> relock(mutex_);
      if (!failing_)
        spdlog::warn("sidecars: could not publish or read the heartbeats of group '{}' in {}: {}; until it can, "
                     "this remold cannot tell whether the other sidecars run the same rules",
                     options_.group, options_.registry.full(), e.what());
      failing_ = true;
    }
    lock.lock();
    WaitForNextBeat(lock, published);
  }
  lock.unlock();
  if (!client) return;
  try {  // leave the group at once, not once the heartbeat ages
    Doc statement, q;
    AppendString(q.mut(), "_id", id_);
    AppendDoc(statement.mut(), "q", q);
    BSON_APPEND_INT32(statement.mut(), "limit", 1);
    client->WriteBatch(options_.registry, "delete", {statement});
  } catch (const std::exception&) {
    // It ages out.
  }
}

void SidecarRegistry::Beat(BackendClient& client) {
  const std::vector<NamespaceForms> forms = FormsOf(*serving_->Load());
  Doc filter, set, current, update;
  AppendString(filter.mut(), "_id", id_);
  AppendString(set.mut(), "group", options_.group);
  AppendString(set.mut(), "sidecar", description_);
  std::vector<Doc> entries;
  for (const NamespaceForms& f : forms) entries.push_back(FormsDoc(f));
  AppendArray(set.mut(), "forms", entries);
  BSON_APPEND_BOOL(current.mut(), "seen", true);
  AppendDoc(update.mut(), "$set", set);
  AppendDoc(update.mut(), "$currentDate", current);
  client.UpdateOne(options_.registry, filter.get(), update.get(), true);

  // Every heartbeat of the group; this one's says what time it is on the backend.
  Doc group;
  AppendString(group.mut(), "group", options_.group);
  std::vector<std::pair<int64_t, SidecarForms>> heartbeats;
  int64_t now = 0;
  client.Find(options_.registry, group.get(), nullptr, [&](DocumentView doc) {
    bson_iter_t seen;
    if (!bson_iter_init_find(&seen, doc.bson, "seen") || !BSON_ITER_HOLDS_DATE_TIME(&seen)) return;
    const int64_t at = bson_iter_date_time(&seen);
    const std::string id = FindString(doc.bson, "_id").value_or("");
    if (id == id_) {
      now = at;
      return;
    }
    heartbeats.push_back({at, {id, FindString(doc.bson, "sidecar").value_or(id), FormsFromDoc(doc.bson)}});
  });
  std::vector<SidecarForms> live;
  for (auto& [at, sidecar] : heartbeats)
    if (at >= now - options_.live.count()) live.push_back(std::move(sidecar));
  if (options_.others_write) {
    std::map<std::string, std::map<std::string, std::string>> writes;
    for (const NamespaceForms& mine : forms)
      for (const SidecarForms& other : live) writes[mine.ns.full()][Writes(other.forms, mine.ns.full())] = other.description;
    options_.others_write(writes);  // may change how this remold's rules serve: read them again
  }
  Report(Disagreements({id_, "this remold", FormsOf(*serving_->Load())}, live), live.size());

  if (++beats_ % kSweepEvery == 1 && now > 0) {
    Doc statement, q, older;
    AppendString(q.mut(), "group", options_.group);
    BSON_APPEND_DATE_TIME(older.mut(), "$lt", now - kForgetMs);
    AppendDoc(q.mut(), "seen", older);
    AppendDoc(statement.mut(), "q", q);
    BSON_APPEND_INT32(statement.mut(), "limit", 0);
    client.WriteBatch(options_.registry, "delete", {statement});
  }
}

void SidecarRegistry::Report(std::vector<Disagreement> now, size_t live) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto join = [](const std::vector<std::string>& forms) {
    std::string out;
    for (const std::string& f : forms) out += (out.empty() ? "'" : ", '") + f + "'";
    return out;
  };
  for (const Disagreement& d : now) {
    if (std::find(current_.begin(), current_.end(), d) != current_.end()) continue;
    if (d.this_reads)
      spdlog::error("sidecars: this remold cannot read what {} writes to {}: it stores '{}', and this remold's rules "
                    "read {}; /readyz answers 503 until the sidecars of group '{}' run rules that agree",
                    d.writer, d.ns, d.writes, join(d.reads), options_.group);
    else
      spdlog::error("sidecars: {} cannot read what this remold writes to {}: this remold stores '{}', and its rules "
                    "read {}", d.reader, d.ns, d.writes, join(d.reads));
  }
  for (const Disagreement& d : current_)
    if (std::find(now.begin(), now.end(), d) == now.end())
      spdlog::info("sidecars: {} reads what {} writes to {} again (or it left)", d.reader, d.writer, d.ns);
  current_ = std::move(now);
  live_ = live;
}

}  // namespace remold
