// The ReconcileContext (patterns/reconcile/context.h) of `remold reconcile`
// and `remold migrate`: the patterns' checks read and repair through the
// tool's backend connection; drift lines go to `out` (patterns/reconcile/
// drift.h says their format), progress and notes to `err` (a bar when it
// is a terminal, plain lines otherwise).
#pragma once

#include <memory>
#include <ostream>
#include <string>

#include "patterns/reconcile/context.h"
#include "tools/common/backend_client.h"
#include "tools/common/progress.h"

namespace remold {

class BackendReconcileContext : public ReconcileContext {
 public:
  BackendReconcileContext(BackendClient& backend, bool fix, std::ostream& out, std::ostream& err, bool terminal)
      : ReconcileContext(fix), backend_(backend), out_(out), err_(err), terminal_(terminal) {}

  void Find(const Namespace& ns, const bson_t* filter, const bson_t* options, const DocumentFn& each) const override;
  void Aggregate(const Namespace& ns, const bson_t* pipeline, const DocumentFn& each) const override;
  void Repair(const Namespace& ns, const Doc& filter, const Doc& update, bool upsert,
              DocumentDrift& drift) const override;
  // Shown as "reconcile: rule comments: 4812/11630 blog.posts checked".
  std::unique_ptr<ScanProgress> Scan(const std::string& rule, const Namespace& ns) const override;
  void Report(const DocumentDrift& drift) const override;
  void Note(const std::string& rule, const std::string& text) const override;

 private:
  class Scanning;

  BackendClient& backend_;
  std::ostream& out_;
  std::ostream& err_;
  bool terminal_;
  // The bar a drift line is printed above; set while a scan is shown.
  mutable Progress* shown_ = nullptr;
};

}  // namespace remold
