// What a pattern's reconcile check (patterns/reconcile.h) works with: the
// collections it reads, the guarded repairs it runs, the progress of its
// scans, and where drift is reported. `remold reconcile` implements it
// over its backend connection and its terminal (tools/reconcile/
// backend_context.h); a check sees neither. Pattern-blind.
//
// Reads and repairs throw on a backend that fails (the tool reports the
// rule and stops); a repair the backend refuses is recorded in its drift.
// A read's `each` must not read or repair through the context (the tool
// has one connection, and a cursor open on it): a check reads what it
// needs first, then checks it.
#pragma once

#include <bson/bson.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "common/doc.h"
#include "patterns/reconcile/drift.h"
#include "rules/namespace.h"

namespace remold {

// The progress of one scan of a collection.
class ScanProgress {
 public:
  virtual ~ScanProgress() = default;
  // One more document checked.
  virtual void Step() = 0;
  // The scan is over: its final state is shown.
  virtual void Finish() = 0;
};

class ReconcileContext {
 public:
  using DocumentFn = std::function<void(const bson_t* document)>;

  explicit ReconcileContext(bool fix) : fix_(fix) {}
  virtual ~ReconcileContext() = default;

  // Whether drift is repaired (--fix), or only reported.
  bool fix() const { return fix_; }

  // Calls `each` for every document find(filter, options) returns
  // (options as the find command takes them: projection, sort, limit).
  virtual void Find(const Namespace& ns, const bson_t* filter, const bson_t* options, const DocumentFn& each) const = 0;
  // Runs `pipeline` ({pipeline: [...]}) and calls `each` per result.
  virtual void Aggregate(const Namespace& ns, const bson_t* pipeline, const DocumentFn& each) const = 0;

  // Runs a repair (an update of one document, or an upsert that only
  // inserts) and records its outcome in `drift`: applied, or not (the
  // document changed meanwhile), and whether every field was computable.
  virtual void Repair(const Namespace& ns, const Doc& filter, const Doc& update, bool upsert,
                      DocumentDrift& drift) const = 0;

  // A scan of `ns` for rule `rule`, its progress shown until Finish().
  virtual std::unique_ptr<ScanProgress> Scan(const std::string& rule, const Namespace& ns) const = 0;
  // Reports one drifted document (above the scan's progress, if one is shown).
  virtual void Report(const DocumentDrift& drift) const = 0;
  // A phase note: "counting blog.comments by postId for blog.posts".
  virtual void Note(const std::string& rule, const std::string& text) const = 0;

 private:
  bool fix_;
};

}  // namespace remold
