#include "tools/migrate/batch_filters.h"

#include <string>
#include <thread>

namespace remold {
namespace {

Doc IdsUnder(const char* op, const std::vector<Doc>& ids) {
  Doc set, filter;
  bson_t array;
  bson_append_array_begin(set.mut(), op, -1, &array);
  for (size_t i = 0; i < ids.size(); ++i) AppendValue(&array, std::to_string(i), *Find(ids[i].get(), "_id"));
  bson_append_array_end(set.mut(), &array);
  AppendDoc(filter.mut(), "_id", set);
  return filter;
}

}  // namespace

Doc All(std::vector<Doc> clauses) {
  Doc all;
  AppendArray(all.mut(), "$and", clauses);
  return all;
}

Doc After(const Doc& after) {
  Doc gt, filter;
  AppendValue(gt.mut(), "$gt", *Find(after.get(), "_id"));
  AppendDoc(filter.mut(), "_id", gt);
  return filter;
}

Doc NoneOf(const std::vector<Doc>& ids) { return IdsUnder("$nin", ids); }

Doc AnyOf(const std::vector<Doc>& ids) { return IdsUnder("$in", ids); }

Doc IdOf(const bson_t* document) {
  Doc id;
  if (auto value = Find(document, "_id")) AppendValue(id.mut(), "_id", *value);
  return id;
}

void Throttle(std::optional<double> rate, int64_t done, std::chrono::steady_clock::time_point start) {
  if (!rate || *rate <= 0) return;
  const auto due = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                               std::chrono::duration<double>(done / *rate));
  std::this_thread::sleep_until(due);
}

}  // namespace remold
