#include "tools/reconcile/context.h"

#include <algorithm>

namespace remold {

void CheckContext::Repair(const Namespace& ns, const Doc& filter, const Doc& update, bool upsert,
                          DocumentDrift& drift) const {
  bool computable = std::none_of(drift.fields.begin(), drift.fields.end(),
                                 [](const FieldDrift& field) { return !field.error.empty(); });
  if (update.empty()) {
    drift.outcome = FixOutcome::kCannotCompute;
    return;
  }
  try {
    UpdateResult result = backend.UpdateOne(ns, filter.get(), update.get(), upsert);
    bool applied = upsert ? result.upserted > 0 : result.matched > 0;
    if (!applied) drift.outcome = FixOutcome::kChanged;
    else drift.outcome = computable ? FixOutcome::kFixed : FixOutcome::kCannotCompute;
  } catch (const BackendError& e) {
    drift.outcome = FixOutcome::kFailed;
    drift.failure = e.what();
  }
}

}  // namespace remold
