#include "app/adoption.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>
#include <utility>
#include <variant>

#include "ruleset/migrations.h"
#include "tools/common/backend_client.h"

namespace remold {
namespace {

using Clock = std::chrono::steady_clock;

// A layer with documents left is counted again this often, besides when
// its migration's checkpoint changes. The checkpoint of every layer is read
// this often: a migration done, or one back to the flat form (the rule
// left in place), is seen within it.
constexpr auto kRecount = std::chrono::minutes(5);
constexpr auto kCheckpointPoll = std::chrono::seconds(3);
// After a count that failed (the backend unreachable, no rights).
constexpr auto kRetry = std::chrono::seconds(5);

}  // namespace

RuleSet ServingRules(const RuleSet& loaded, const std::set<std::string>& in_form) {
  std::vector<Rule> rules = loaded.rules();
  for (Rule& rule : rules) {
    std::vector<PatternRule*> layers{&rule.pattern};
    for (PatternRule& below : rule.below) layers.push_back(&below);
    for (size_t i = 0; i < layers.size(); ++i)
      if (!in_form.count(LayerKey(rule, i))) *layers[i] = WhileUnconvertedLayer(*layers[i]);
  }
  return RuleSet(std::move(rules));
}

struct AdoptionMonitor::Count {
  std::optional<int64_t> left;  // none: the count failed, or cannot be taken
  bool countable = true;
  std::string error;
  size_t probe = 0;  // the first probe that found something (or failed)
  // The migration's checkpoint, read just before the count: a later change
  // of it is progress the count did not see.
  std::optional<std::string> checkpoint;
};

AdoptionMonitor::AdoptionMonitor(BackendOptions backend, BackendIdentity identity,
                                 std::shared_ptr<RuleSetHolder> serving)
    : backend_(std::move(backend)), identity_(std::move(identity)), serving_(std::move(serving)) {
  thread_ = std::thread([this] { Run(); });
}

AdoptionMonitor::~AdoptionMonitor() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void AdoptionMonitor::Load(std::shared_ptr<const RuleSet> loaded) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::map<std::string, Layer> layers;
  for (UnconvertedProbe& probe : UnconvertedProbes(*loaded, loaded_.get())) {
    if (!probe.decides) {
      once_.push_back(std::move(probe));
      continue;
    }
    Layer& layer = layers[probe.layer_key];
    layer.rule = probe.rule;
    layer.pattern = probe.pattern;
    layer.due = Clock::now();
    layer.probes.push_back(std::move(probe));
  }
  // The layers a reload keeps as they were keep their state.
  for (const Rule& rule : loaded->rules())
    for (size_t i = 0; i < rule.layers().size(); ++i) {
      auto kept = layers_.find(LayerKey(rule, i));
      if (kept != layers_.end()) layers.insert(std::move(*kept));
    }
  layers_ = std::move(layers);
  loaded_ = std::move(loaded);
  Publish();
  wake_.notify_all();
}

void AdoptionMonitor::Publish() {
  std::set<std::string> in_form;
  for (const Rule& rule : loaded_->rules()) {
    if (disturbed_.count(rule.name)) continue;
    for (size_t i = 0; i < rule.layers().size(); ++i) {
      const std::string key = LayerKey(rule, i);
      auto layer = layers_.find(key);
      if (layer == layers_.end() || layer->second.state == State::kInForm) in_form.insert(key);
    }
  }
  serving_->Store(std::make_shared<const RuleSet>(ServingRules(*loaded_, in_form)));
}

void AdoptionMonitor::OthersWrite(const std::map<std::string, std::map<std::string, std::string>>& writes) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!loaded_) return;
  std::map<std::string, std::string> disturbed;  // rule -> why
  for (const Rule& rule : loaded_->rules())
    for (const NamespaceForms& forms : rule.Forms()) {  // as it serves once in form
      auto written = writes.find(forms.ns.full());
      if (written == writes.end()) continue;
      for (const auto& [form, sidecar] : written->second)
        if (std::find(forms.reads.begin(), forms.reads.end(), form) == forms.reads.end() &&
            !disturbed.count(rule.name))
          disturbed[rule.name] = sidecar + " writes " + forms.ns.full() + " as '" + form + "'";
    }
  bool changed = false;
  for (const auto& [rule, why] : disturbed) {
    if (disturbed_.count(rule)) continue;
    changed = true;
    spdlog::warn("rules: rule '{}': {}, which its form does not read: it serves as while documents written "
                 "before it remain, until the sidecars agree", rule, why);
  }
  for (const std::string& rule : disturbed_) {
    if (disturbed.count(rule)) continue;
    changed = true;
    spdlog::info("rules: rule '{}': no live sidecar writes its collections in a form it does not read any more; "
                 "it counts what they wrote meanwhile", rule);
    for (auto& [key, layer] : layers_)
      if (layer.rule == rule && layer.state != State::kUncountable) {
        layer.state = State::kCounting;  // what was written meanwhile is counted before anything else
        layer.due = Clock::now();
      }
  }
  disturbed_.clear();
  for (const auto& [rule, why] : disturbed) disturbed_.insert(rule);
  if (!changed) return;
  Publish();
  wake_.notify_all();
}

bool AdoptionMonitor::AwaitCounts(std::chrono::milliseconds deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  return wake_.wait_for(lock, deadline, [this] {
    for (const auto& [key, layer] : layers_)
      if (layer.state == State::kCounting) return false;
    return true;
  });
}

std::vector<AdoptionMonitor::LayerState> AdoptionMonitor::States() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<LayerState> out;
  for (const auto& [key, layer] : layers_) {
    const char* state = layer.state == State::kCounting     ? "counting"
                        : layer.state == State::kInForm     ? "in_form"
                        : layer.state == State::kNotInForm  ? "not_in_form"
                                                            : "uncountable";
    out.push_back({layer.rule, layer.pattern, state, layer.left});
  }
  return out;
}

BackendClient& AdoptionMonitor::Client() {
  if (!client_)
    client_ = std::make_unique<BackendClient>(backend_, identity_,
                                              backend_.app_name.empty() ? "remold" : backend_.app_name);
  return *client_;
}

void AdoptionMonitor::Run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    // What is due, taken out under the lock and counted without it.
    const Clock::time_point now = Clock::now();
    std::vector<UnconvertedProbe> once = std::move(once_);
    once_.clear();
    std::vector<std::pair<std::string, std::vector<UnconvertedProbe>>> due;
    std::vector<std::pair<std::string, UnconvertedProbe>> checkpoints;
    for (auto& [key, layer] : layers_) {
      if (layer.state == State::kUncountable) continue;
      if (layer.due <= now) {
        due.emplace_back(key, layer.probes);
      } else if (layer.state != State::kCounting && layer.checkpoint_due <= now) {
        checkpoints.emplace_back(key, layer.probes.front());
        layer.checkpoint_due = now + kCheckpointPoll;
      }
    }
    lock.unlock();

    for (const UnconvertedProbe& probe : once) WarnOnce(probe);
    std::vector<std::pair<std::string, Count>> counted;
    for (auto& [key, probes] : due) counted.emplace_back(key, CountLayer(probes));
    std::vector<std::pair<std::string, std::string>> seen;  // layer, its checkpoint now
    for (auto& [key, probe] : checkpoints) {
      try {
        seen.emplace_back(key, CheckpointOf(probe));
      } catch (const std::exception&) {
        // The next count says why.
      }
    }

    lock.lock();
    for (auto& [key, checkpoint] : seen) {
      auto layer = layers_.find(key);
      if (layer == layers_.end() || layer->second.checkpoint == checkpoint) continue;
      // The migration moved on (the first look only notes where it stands).
      if (layer->second.checkpoint) layer->second.due = Clock::now();
      layer->second.checkpoint = std::move(checkpoint);
    }
    bool changed = false;
    for (auto& [key, count] : counted) {
      auto layer = layers_.find(key);
      if (layer == layers_.end()) continue;  // a reload dropped it meanwhile
      const bool was_in_form = layer->second.state == State::kInForm;
      Record(layer->second, count);
      changed |= was_in_form != (layer->second.state == State::kInForm);
    }
    if (changed) Publish();
    if (!counted.empty()) wake_.notify_all();  // AwaitCounts
    if (!once_.empty()) continue;
    Clock::time_point next = Clock::now() + kCheckpointPoll;
    for (const auto& [key, layer] : layers_)
      if (layer.state == State::kCounting || layer.state == State::kNotInForm) next = std::min(next, layer.due);
    wake_.wait_until(lock, next, [&] {
      if (stopping_ || !once_.empty()) return true;
      for (const auto& [key, layer] : layers_)
        if (layer.state == State::kCounting && layer.due <= Clock::now()) return true;
      return false;
    });
  }
}

void AdoptionMonitor::WarnOnce(const UnconvertedProbe& probe) {
  if (probe.stages.empty()) return;
  try {
    const int64_t count = Client().CountPipeline(probe.ns, probe.stages, kUnconvertedCountLimit);
    if (count > 0) spdlog::warn("rules: {}", DescribeUnconverted(probe, count));
  } catch (const std::exception& e) {
    spdlog::warn("rules: could not count the {} of {} for rule '{}': {}", probe.what, probe.ns.full(), probe.rule,
                 e.what());
  }
}

AdoptionMonitor::Count AdoptionMonitor::CountLayer(const std::vector<UnconvertedProbe>& probes) {
  Count count;
  try {
    count.checkpoint = CheckpointOf(probes.front());
  } catch (const std::exception&) {
    // The count says why; the first look at the checkpoint notes it then.
  }
  int64_t left = 0;
  bool found = false;
  for (size_t i = 0; i < probes.size(); ++i) {
    const UnconvertedProbe& probe = probes[i];
    if (probe.stages.empty()) {
      count.countable = false;
      count.probe = i;
      return count;
    }
    try {
      const int64_t n = Client().CountPipeline(probe.ns, probe.stages, kUnconvertedCountLimit);
      if (n > 0 && !found) {
        found = true;
        count.probe = i;
      }
      left += n;
    } catch (const std::exception& e) {
      count.error = "could not count the " + probe.what + " of " + probe.ns.full() + " for rule '" + probe.rule +
                    "': " + e.what();
      count.probe = i;
      return count;
    }
  }
  count.left = left;
  return count;
}

void AdoptionMonitor::Record(Layer& layer, const Count& count) {
  const UnconvertedProbe& probe = layer.probes[count.probe];
  if (!count.countable) {
    layer.state = State::kUncountable;
    spdlog::warn("rules: rule '{}' ({}, {}): the {} cannot be counted (a $lookup cannot reach another "
                 "database); until the rule says `migrating: false`, {}",
                 probe.rule, probe.pattern, probe.ns.full(), probe.what, probe.consequence);
    return;
  }
  if (!count.left) {
    layer.due = Clock::now() + kRetry;
    if (!layer.failing) spdlog::warn("rules: {}; until it can, {}", count.error, probe.consequence);
    layer.failing = true;
    return;
  }
  layer.failing = false;
  layer.checkpoint = count.checkpoint;
  const State before = layer.state;
  layer.left = *count.left;
  layer.checkpoint_due = Clock::now() + kCheckpointPoll;
  if (*count.left == 0) {
    layer.state = State::kInForm;
    layer.due = Clock::time_point::max();  // counted again when its checkpoint changes
    if (before == State::kNotInForm)
      spdlog::info("rules: rule '{}' ({}, {}): nothing written before the rule is left: it serves its own form "
                   "alone now", probe.rule, probe.pattern, probe.ns.full());
    return;
  }
  layer.state = State::kNotInForm;
  layer.due = Clock::now() + kRecount;
  if (before != State::kNotInForm) spdlog::warn("rules: {}", DescribeUnconverted(probe, *count.left));
}

std::string AdoptionMonitor::CheckpointOf(const UnconvertedProbe& probe) {
  Doc filter;
  AppendString(filter.mut(), "_id", probe.migration);
  std::string seen;
  Client().Find(Namespace{probe.ns.db, "remold_migrations"}, filter.get(), nullptr,
                [&](DocumentView doc) { seen = Doc::FromBson(doc.bson).ToRelaxedJson(); });
  return seen;
}

}  // namespace remold
