// batch_load: loading documents with insertMany in batches, timed, the way
// the pattern benches fill a collection before they query it.
//
// Contract:
//   - load_in_batches() inserts `docs` in order with unordered insertMany of
//     `batch` documents and returns the wall seconds and the CPU spent
//     meanwhile. The first batch not fully inserted stops the load with a
//     std::runtime_error naming `what` and the documents of the batch.
#pragma once

#include "bench_mongoc.h"
#include "cpu_probe.h"

#include <string>

namespace bench_common {

struct LoadTiming {
  double seconds = 0;
  CpuSeconds cpu;
};

LoadTiming load_in_batches(mongoc_collection_t* collection, const Documents& docs,
                           int batch, const CpuProbe& cpu, const std::string& what);

}  // namespace bench_common
