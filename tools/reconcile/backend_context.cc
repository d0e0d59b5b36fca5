#include "tools/reconcile/backend_context.h"

#include <algorithm>

namespace remold {

class BackendReconcileContext::Scanning : public ScanProgress {
 public:
  Scanning(const BackendReconcileContext& context, ProgressLabels labels, std::optional<int64_t> total)
      : context_(context), progress_(context.err_, context.terminal_, std::move(labels), total) {
    context_.shown_ = &progress_;
  }
  ~Scanning() override {
    if (context_.shown_ == &progress_) context_.shown_ = nullptr;
  }
  void Step() override { progress_.Step(); }
  void Finish() override {
    progress_.Finish();
    if (context_.shown_ == &progress_) context_.shown_ = nullptr;
  }

 private:
  const BackendReconcileContext& context_;
  Progress progress_;
};

void BackendReconcileContext::Find(const Namespace& ns, const bson_t* filter, const bson_t* options,
                                   const DocumentFn& each) const {
  backend_.Find(ns, filter, options, [&](DocumentView view) { each(view.bson); });
}

void BackendReconcileContext::Aggregate(const Namespace& ns, const bson_t* pipeline, const DocumentFn& each) const {
  backend_.Aggregate(ns, pipeline, [&](DocumentView view) { each(view.bson); });
}

void BackendReconcileContext::Repair(const Namespace& ns, const Doc& filter, const Doc& update, bool upsert,
                                     DocumentDrift& drift) const {
  bool computable = std::none_of(drift.fields.begin(), drift.fields.end(),
                                 [](const FieldDrift& field) { return !field.error.empty(); });
  if (update.empty()) {
    drift.outcome = FixOutcome::kCannotCompute;
    return;
  }
  try {
    UpdateResult result = backend_.UpdateOne(ns, filter.get(), update.get(), upsert);
    bool applied = upsert ? result.upserted > 0 : result.matched > 0;
    if (!applied) drift.outcome = FixOutcome::kChanged;
    else drift.outcome = computable ? FixOutcome::kFixed : FixOutcome::kCannotCompute;
  } catch (const BackendError& e) {
    drift.outcome = FixOutcome::kFailed;
    drift.failure = e.what();
  }
}

std::unique_ptr<ScanProgress> BackendReconcileContext::Scan(const std::string& rule, const Namespace& ns) const {
  ProgressLabels labels{"reconcile: rule " + rule, ns.full(), "checked", ns.collection};
  return std::make_unique<Scanning>(*this, std::move(labels), backend_.EstimatedCount(ns));
}

void BackendReconcileContext::Report(const DocumentDrift& drift) const {
  if (shown_) shown_->Clear();
  out_ << FormatDrift(drift) << "\n" << std::flush;
}

void BackendReconcileContext::Note(const std::string& rule, const std::string& text) const {
  err_ << "reconcile: rule " << rule << ": " << text << "\n" << std::flush;
}

}  // namespace remold
