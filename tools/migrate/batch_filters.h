// What every migration pass (tools/migrate/) builds its batches with: the
// filters of a batch read in _id order, and the throttle between batches.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "common/doc.h"

namespace remold {

// {$and: clauses}
Doc All(std::vector<Doc> clauses);
// {_id: {$gt: <the _id of after>}}
Doc After(const Doc& after);
// {_id: {$nin: [<the _id of each>]}}
Doc NoneOf(const std::vector<Doc>& ids);
// {_id: {$in: [<the _id of each>]}}
Doc AnyOf(const std::vector<Doc>& ids);
// {_id: <the document's _id>} (empty when it has none).
Doc IdOf(const bson_t* document);

// Sleeps as needed to keep `done` documents since `start` within `rate`
// documents per second.
void Throttle(std::optional<double> rate, int64_t done, std::chrono::steady_clock::time_point start);

}  // namespace remold
