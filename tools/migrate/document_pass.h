// One migration pass over a collection, document by document, in batches:
// read the documents still in the source form, convert each, and replace
// it under a guard that it is exactly as read (rewrite/unchanged_guard.h),
// so a write of the application in between is never overwritten; the
// document is then read again later and converted from its new state.
//
// Batches follow _id order from the checkpoint (tools/migrate/checkpoint.h),
// saved after each; then a sweep without the order catches what the order
// cannot reach (documents inserted behind it, _ids of another type, guards
// that lost a race). A document that cannot be converted is reported once
// and left as it is. Nothing is written with `dry_run`: the pass reads in
// _id order and reports what it would do.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "common/doc.h"
#include "tools/common/backend_client.h"
#include "tools/common/progress.h"
#include "tools/migrate/checkpoint.h"

namespace remold {

struct DocumentConverter {
  using Convert = std::function<std::optional<Doc>(const Doc& document, std::string* why)>;
  Doc source;  // the filter of the documents still to convert
  Convert convert;
  std::string source_form;  // "the flat form", "an older version": where documents are left
  std::string when_done;    // what the operator may do once none is left
};

struct PassOptions {
  int64_t batch = 500;
  std::optional<double> max_rate;  // documents per second
  bool dry_run = false;
};

struct PassOutcome {
  int64_t converted = 0;  // this run (with dry_run: would be)
  int64_t failed = 0;     // this run
  int64_t left = 0;       // still in the source form at the end (not counted with dry_run)
};

// Runs the pass; every failure is one line on `report` ("cannot convert
// _id ...: why"). Throws BackendError when the backend fails.
PassOutcome RunDocumentPass(BackendClient& backend, Checkpoint& checkpoint,
                            const DocumentConverter& converter, const PassOptions& options,
                            Progress& progress, std::ostream& report);

}  // namespace remold
