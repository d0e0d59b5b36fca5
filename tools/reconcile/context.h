// What each check of `remold reconcile` works with: the backend, whether to
// repair, and where report lines (stdout) and progress (stderr) go.
#pragma once

#include <ostream>
#include <string>

#include "common/doc.h"
#include "ruleset/rule.h"
#include "tools/common/backend_client.h"
#include "tools/common/progress.h"
#include "tools/reconcile/drift.h"

namespace remold {

struct CheckContext {
  BackendClient& backend;
  bool fix = false;
  std::ostream& out;
  std::ostream& err;
  bool terminal = false;  // err is a terminal: draw a progress bar

  // The progress of checking `ns` for `rule`, on err:
  //   reconcile: rule comments: 4812/11630 blog.posts checked
  ProgressLabels Scanning(const std::string& rule, const Namespace& ns) const {
    return {"reconcile: rule " + rule, ns.full(), "checked", ns.collection};
  }

  // Prints one drift line, clearing the progress bar (if any) first.
  void Report(Progress* progress, const DocumentDrift& drift) const {
    if (progress) progress->Clear();
    out << FormatDrift(drift) << "\n" << std::flush;
  }

  // Runs a repair (an update, or an insert-only upsert) and records its
  // outcome in `drift`: applied or not, and whether every field could be
  // computed.
  void Repair(const Namespace& ns, const Doc& filter, const Doc& update, bool upsert,
              DocumentDrift& drift) const;

  // A phase note on stderr ("reconcile: rule comments: counting ...").
  void Note(const std::string& rule, const std::string& text) const {
    err << "reconcile: rule " << rule << ": " << text << "\n" << std::flush;
  }
};

}  // namespace remold
