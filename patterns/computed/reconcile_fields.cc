#include "patterns/computed/reconcile_fields.h"

#include <algorithm>
#include <memory>

#include "patterns/computed/reconcile_expected.h"

namespace remold {
namespace {

Doc Projection(const ComputedRule& computed) {
  Doc projection;
  auto include = [&](const std::string& field) {
    if (!Find(projection.get(), field)) bson_append_int32(projection.mut(), field.c_str(), -1, 1);
  };
  include("_id");
  for (const ComputedField& field : computed.fields) {
    include(field.field);
    for (const std::string& input : field.inputs) include(input);
  }
  Doc options;
  AppendDoc(options.mut(), "projection", projection);
  return options;
}

// The drifted fields' guards, and their inputs' values as read.
std::vector<Guard> Guards(const ComputedRule& computed, const std::vector<FieldDrift>& drifts,
                          const bson_t* document) {
  std::vector<Guard> guards = DriftGuards(drifts);
  auto guarded = [&](const std::string& field) {
    return std::any_of(guards.begin(), guards.end(), [&](const Guard& g) { return g.field == field; });
  };
  for (const FieldDrift& drift : drifts) {
    auto field = std::find_if(computed.fields.begin(), computed.fields.end(),
                              [&](const ComputedField& f) { return f.field == drift.field; });
    if (field == computed.fields.end() || !drift.error.empty()) continue;
    for (const std::string& input : field->inputs) {
      if (guarded(input)) continue;
      std::optional<bson_iter_t> value = Find(document, input);
      guards.push_back({input, value ? std::optional<Value>(Value::Of(*value)) : std::nullopt});
    }
  }
  return guards;
}

void Repair(const ReconcileContext& context, const ComputedRule& computed, const bson_t* document,
            DocumentDrift& drift) {
  Doc filter = GuardedFilter(IdentityOf(document), Guards(computed, drift.fields, document));
  context.Repair(computed.logical, filter, RepairUpdate(drift.fields), false, drift);
}

}  // namespace

Summary CheckFields(const ReconcileContext& context, const std::string& rule, const ComputedRule& computed) {
  Summary summary;
  summary.rule = rule;
  summary.ns = computed.logical.full();
  std::unique_ptr<ScanProgress> progress = context.Scan(rule, computed.logical);
  context.Find(computed.logical, Doc().get(), Projection(computed).get(), [&](const bson_t* document) {
    progress->Step();
    ++summary.checked;
    std::vector<FieldDrift> drifts = Compare(document, FieldExpectations(computed.fields, document));
    if (drifts.empty()) return;
    DocumentDrift drift;
    drift.ns = computed.logical.full();
    drift.identity = IdentityOf(document).ToRelaxedJson();
    drift.fields = std::move(drifts);
    if (context.fix()) Repair(context, computed, document, drift);
    summary.Count(drift);
    context.Report(drift);
  });
  progress->Finish();
  return summary;
}

}  // namespace remold
