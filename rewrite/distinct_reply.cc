#include "rewrite/distinct_reply.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "rewrite/bson_compare.h"

namespace remold {
namespace {

// Appends under `key` the values of both arrays, each value once, in
// MongoDB's order.
void AppendMergedValues(bson_t* out, const char* key, const std::optional<bson_iter_t>& first,
                        const std::optional<bson_iter_t>& second) {
  std::vector<bson_iter_t> values;
  for (const auto& array : {first, second}) {
    bson_iter_t copy, child;
    if (!array || !BSON_ITER_HOLDS_ARRAY(&*array)) continue;
    copy = *array;
    if (!bson_iter_recurse(&copy, &child)) continue;
    while (bson_iter_next(&child)) values.push_back(child);
  }
  auto less = [](const bson_iter_t& a, const bson_iter_t& b) { return CompareBsonValues(a, b) < 0; };
  auto same = [](const bson_iter_t& a, const bson_iter_t& b) { return CompareBsonValues(a, b) == 0; };
  std::sort(values.begin(), values.end(), less);
  values.erase(std::unique(values.begin(), values.end(), same), values.end());
  bson_t array;
  bson_append_array_begin(out, key, -1, &array);
  for (size_t i = 0; i < values.size(); ++i) AppendValue(&array, std::to_string(i), values[i]);
  bson_append_array_end(out, &array);
}

}  // namespace

Doc DistinctReply(std::span<const Doc> replies) {
  Doc out;
  auto cursor = FindDocument(replies.front().get(), "cursor");
  auto batch = cursor ? Find(cursor->get(), "firstBatch") : std::nullopt;
  std::vector<Doc> docs = batch ? ArrayDocuments(*batch) : std::vector<Doc>();
  std::optional<bson_iter_t> values;
  if (!docs.empty()) values = Find(docs.front().get(), "values");
  std::optional<bson_iter_t> more;
  if (replies.size() > 1) more = Find(replies[1].get(), "values");
  AppendMergedValues(out.mut(), "values", values, more);
  for (const char* key : {"$clusterTime", "operationTime"}) {
    if (auto v = Find(replies.front().get(), key)) AppendValue(out.mut(), key, *v);
  }
  BSON_APPEND_DOUBLE(out.mut(), "ok", 1.0);
  return out;
}

std::vector<Doc> DistinctStages(const std::string& key) {
  // One $unwind per component of the path: distinct looks into an array
  // met on the way ({a: [{b: 1}, {b: 2}]} gives 1 and 2 for "a.b") and
  // into the array at the end. Not into an array in an array on the way:
  // MongoDB finds no field of that name in it ({a: [[{b: 1}]]} gives
  // nothing for "a.b"), so such an element goes no further.
  std::vector<Doc> stages;
  for (size_t end = key.find('.'); ; end = key.find('.', end + 1)) {
    const std::string prefix = key.substr(0, end);
    Doc unwind;
    AppendString(unwind.mut(), "path", "$" + prefix);
    BSON_APPEND_BOOL(unwind.mut(), "preserveNullAndEmptyArrays", true);
    stages.push_back(Stage("$unwind", unwind));
    if (end == std::string::npos) break;
    // {$not: {$exists: true, $type: "array"}}: $exists first, as a
    // document starting with "$type" reads as a legacy binary value to
    // Extended JSON readers (libbson's, remold explain's).
    Doc not_array, type, match;
    BSON_APPEND_BOOL(type.mut(), "$exists", true);
    AppendString(type.mut(), "$type", "array");
    AppendDoc(not_array.mut(), "$not", type);
    AppendDoc(match.mut(), prefix, not_array);
    stages.push_back(Stage("$match", match));
  }
  // Where the unwinds left no value (an empty array, a missing field),
  // nothing is added: MongoDB's $addToSet skips a missing value, but
  // DocumentDB's adds null (docs/backends.md), so those go first.
  Doc present, exists;
  BSON_APPEND_BOOL(exists.mut(), "$exists", true);
  AppendDoc(present.mut(), key, exists);
  stages.push_back(Stage("$match", present));
  Doc group, add;
  BSON_APPEND_NULL(group.mut(), "_id");
  AppendString(add.mut(), "$addToSet", "$" + key);
  AppendDoc(group.mut(), "values", add);
  stages.push_back(Stage("$group", group));
  return stages;
}

}  // namespace remold
