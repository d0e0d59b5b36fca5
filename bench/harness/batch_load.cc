// Timed loads in insertMany batches: see batch_load.h.
#include "batch_load.h"

#include "bench_common.h"

#include <algorithm>
#include <stdexcept>

namespace bench_common {

LoadTiming load_in_batches(mongoc_collection_t* collection, const Documents& docs,
                           int batch, const CpuProbe& cpu, const std::string& what) {
  auto unordered = json(R"({"ordered": false})");
  LoadTiming timing;
  const CpuSeconds before = cpu.now();
  const auto start = Clock::now();
  for (size_t begin = 0; begin < docs.size(); begin += static_cast<size_t>(batch)) {
    const size_t count = std::min(docs.size() - begin, static_cast<size_t>(batch));
    const InsertResult result = insert_many(collection, docs.data() + begin, count, unordered.get());
    if (!result.ok)
      throw std::runtime_error("loading " + what + ", documents " + std::to_string(begin) + ".." +
                               std::to_string(begin + count) + ", failed: " + result.error);
  }
  timing.seconds = seconds_since(start);
  timing.cpu = spent(before, cpu.now());
  return timing;
}

}  // namespace bench_common
