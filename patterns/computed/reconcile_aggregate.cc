#include "patterns/computed/reconcile_aggregate.h"

#include <algorithm>
#include <memory>
#include <unordered_map>
#include <unordered_set>

#include "patterns/computed/reconcile_expected.h"

namespace remold {
namespace {

constexpr size_t kConfirmBatch = 500;

using SourcesByLink = std::unordered_map<std::string, LinkSources>;
using ChoicesByLink = std::unordered_map<std::string, LatestChoices>;

std::string KeyOf(const Value& link) {
  bson_iter_t iter = link.iter();
  return LinkKey(iter);
}

// The link value of a document; nullopt when missing or null.
std::optional<bson_iter_t> LinkOf(const bson_t* document, const std::string& field) {
  std::optional<bson_iter_t> link = Find(document, field);
  if (link && bson_iter_type(&*link) == BSON_TYPE_NULL) return std::nullopt;
  return link;
}

Doc FieldDoc(const std::string& field, const Value& value) {
  Doc doc;
  value.AppendTo(doc.mut(), field);
  return doc;
}

class AggregateCheck {
 public:
  AggregateCheck(const ReconcileContext& context, const std::string& rule, const Namespace& source,
                 const ComputedAggregate& aggregate)
      : context_(context), rule_(rule), source_(source), aggregate_(aggregate) {
    summary_.rule = rule;
    summary_.ns = aggregate.target.full();
    // With create_target a source without its target is drift, not an orphan.
    if (!aggregate.create_target) summary_.orphan_links = 0;
  }

  Summary Run() {
    context_.Note(rule_, "counting " + source_.full() + " by " + aggregate_.link_from + " for " +
                             aggregate_.target.full());
    CountSources(nullptr, sources_);
    std::unique_ptr<ScanProgress> progress = context_.Scan(rule_, aggregate_.target);
    context_.Find(aggregate_.target, Doc().get(), ProjectionOptions().get(), [&](const bson_t* found) {
      progress->Step();
      ++summary_.checked;
      Scan(found);
    });
    Confirm();
    progress->Finish();
    CheckUnlinkedSources();
    return summary_;
  }

 private:
  Doc ProjectionOptions() const {
    Doc projection;
    auto include = [&](const std::string& field) {
      if (!Find(projection.get(), field)) bson_append_int32(projection.mut(), field.c_str(), -1, 1);
    };
    include("_id");
    include(aggregate_.link_to);
    for (const MaintainedField& field : aggregate_.fields) include(field.field);
    for (const ComputedField& field : aggregate_.derived) include(field.field);
    Doc options;
    AppendDoc(options.mut(), "projection", projection);
    return options;
  }

  // The $group results for `links` (every linked source when null).
  void CountSources(const std::vector<Value>* links, SourcesByLink& out) {
    Doc pipeline = GroupPipeline(aggregate_, links);
    context_.Aggregate(source_, pipeline.get(), [&](const bson_t* found) {
      std::optional<bson_iter_t> link = Find(found, "_id");
      if (!link) return;
      LinkSources& entry = out[LinkKey(*link)];
      entry.link = Value::Of(*link);
      AppendGroupValues(entry.values, found);
    });
    for (const std::string& by : LatestOrders(aggregate_)) {
      Doc pipeline = LatestPipeline(aggregate_, by, links);
      context_.Aggregate(source_, pipeline.get(), [&](const bson_t* found) {
        std::optional<bson_iter_t> link = Find(found, "_id");
        if (!link) return;
        auto entry = out.find(LinkKey(*link));
        if (entry != out.end()) AppendGroupValues(entry->second.values, found);
      });
    }
  }

  // Bulk pass: a target that differs from the counts is a suspect.
  void Scan(const bson_t* target) {
    std::optional<bson_iter_t> link = LinkOf(target, aggregate_.link_to);
    if (!link) {
      // Nothing can link to a missing or null value: no recount needed.
      Settle(target, nullptr, nullptr);
      return;
    }
    std::string key = LinkKey(*link);
    auto entry = sources_.find(key);
    LinkSources* sources = entry == sources_.end() ? nullptr : &entry->second;
    if (sources) sources->seen = true;
    if (Compare(target, AggregateExpectations(aggregate_, sources, nullptr, target)).empty()) return;
    Suspect(Value::Of(*link), std::move(key));
  }

  void Suspect(Value link, std::string key) {
    if (!suspected_.insert(std::move(key)).second) return;
    batch_.push_back(std::move(link));
    if (batch_.size() >= kConfirmBatch) Confirm();
  }

  // Reads the suspects' targets again, then recounts their sources, then
  // settles each target against the fresh counts.
  void Confirm() {
    if (batch_.empty()) return;
    std::unordered_map<std::string, std::vector<Doc>> targets;
    Doc filter = LinkFilter(aggregate_.link_to, &batch_);
    context_.Find(aggregate_.target, filter.get(), ProjectionOptions().get(), [&](const bson_t* found) {
      if (std::optional<bson_iter_t> link = LinkOf(found, aggregate_.link_to))
        targets[LinkKey(*link)].push_back(Doc::FromBson(found));
    });
    SourcesByLink fresh;
    CountSources(&batch_, fresh);
    ChoicesByLink ties = LatestTies(fresh);
    for (const Value& link : batch_) {
      std::string key = KeyOf(link);
      auto sources = fresh.find(key);
      const LinkSources* counted = sources == fresh.end() ? nullptr : &sources->second;
      auto choices = ties.find(key);
      const LatestChoices* tied = choices == ties.end() ? nullptr : &choices->second;
      auto found = targets.find(key);
      if (found == targets.end()) {
        if (aggregate_.create_target && counted) SettleMissing(link, *counted, tied);
        continue;
      }
      for (const Doc& target : found->second) Settle(target.get(), counted, tied);
    }
    batch_.clear();
  }

  // For the batch's latest fields: every source `of` whose `by` is the greatest.
  ChoicesByLink LatestTies(const SourcesByLink& fresh) {
    ChoicesByLink ties;
    if (LatestOrders(aggregate_).empty()) return ties;
    Doc projection;
    for (const std::string& field : aggregate_.inputs) bson_append_int32(projection.mut(), field.c_str(), -1, 1);
    Doc options;
    AppendDoc(options.mut(), "projection", projection);
    Doc filter = LinkFilter(aggregate_.link_from, &batch_);
    context_.Find(source_, filter.get(), options.get(), [&](const bson_t* found) {
      std::optional<bson_iter_t> link = LinkOf(found, aggregate_.link_from);
      if (!link) return;
      std::string key = LinkKey(*link);
      auto counted = fresh.find(key);
      if (counted != fresh.end())
        CollectLatestChoice(aggregate_, counted->second.values.get(), found, ties[key]);
    });
    return ties;
  }

  void Settle(const bson_t* target, const LinkSources* sources, const LatestChoices* ties) {
    std::vector<FieldDrift> drifts = Compare(target, AggregateExpectations(aggregate_, sources, ties, target));
    if (drifts.empty()) return;
    DocumentDrift drift;
    drift.ns = aggregate_.target.full();
    drift.identity = IdentityOf(target).ToRelaxedJson();
    drift.fields = std::move(drifts);
    if (context_.fix()) Repair(target, drift);
    Record(drift);
  }

  void SettleMissing(const Value& link, const LinkSources& sources, const LatestChoices* ties) {
    DocumentDrift drift;
    drift.ns = aggregate_.target.full();
    drift.identity = FieldDoc(aggregate_.link_to, link).ToRelaxedJson();
    drift.target_missing = true;
    Doc nothing;
    drift.fields = Compare(nothing.get(), AggregateExpectations(aggregate_, &sources, ties, nothing.get()));
    if (context_.fix()) Create(link, drift);
    Record(drift);
  }

  void Repair(const bson_t* target, DocumentDrift& drift) {
    std::vector<Guard> guards = DriftGuards(drift.fields);
    if (aggregate_.link_to != "_id") {
      std::optional<bson_iter_t> link = Find(target, aggregate_.link_to);
      guards.push_back({aggregate_.link_to, link ? std::optional<Value>(Value::Of(*link)) : std::nullopt});
    }
    context_.Repair(aggregate_.target, GuardedFilter(IdentityOf(target), guards), RepairUpdate(drift.fields),
                    false, drift);
  }

  // An upsert that only inserts: if the target appeared meanwhile, it is
  // left as it is.
  void Create(const Value& link, DocumentDrift& drift) {
    Doc values;
    for (const FieldDrift& field : drift.fields) {
      if (field.error.empty() && !field.expected.is_null()) field.expected.AppendTo(values.mut(), field.field);
    }
    Doc update;
    AppendDoc(update.mut(), "$setOnInsert", values);
    context_.Repair(aggregate_.target, FieldDoc(aggregate_.link_to, link), update, true, drift);
  }

  void Record(const DocumentDrift& drift) {
    summary_.Count(drift);
    context_.Report(drift);
  }

  // Source link values no target was found for.
  void CheckUnlinkedSources() {
    for (const auto& [key, sources] : sources_) {
      if (sources.seen) continue;
      if (aggregate_.create_target) Suspect(sources.link, key);
      else ++*summary_.orphan_links;
    }
    Confirm();
  }

  const ReconcileContext& context_;
  const std::string& rule_;
  const Namespace& source_;
  const ComputedAggregate& aggregate_;
  SourcesByLink sources_;
  std::vector<Value> batch_;
  std::unordered_set<std::string> suspected_;
  Summary summary_;
};

}  // namespace

Summary CheckAggregate(const ReconcileContext& context, const std::string& rule, const Namespace& source,
                       const ComputedAggregate& aggregate) {
  return AggregateCheck(context, rule, source, aggregate).Run();
}

}  // namespace remold
