#include "rewrite/stored_elsewhere.h"

namespace remold {
namespace {

std::string ReplaceAll(std::string text, std::string_view from, std::string_view to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

}  // namespace

bool IsGenericArgument(std::string_view key) {
  for (std::string_view generic :
       {"$db", "lsid", "$clusterTime", "$readPreference", "comment", "maxTimeMS", "apiVersion", "apiStrict",
        "apiDeprecationErrors", "writeConcern", "readConcern", "txnNumber", "autocommit", "startTransaction",
        "$audit", "$client", "mayBypassWriteBlocking"})
    if (key == generic) return true;
  return false;
}

Doc ErrorNamingLogical(const Doc& reply, const std::string& stored, const std::string& logical) {
  Doc out;
  bson_iter_t it;
  bson_iter_init(&it, reply.get());
  while (bson_iter_next(&it)) {
    std::string_view key = bson_iter_key(&it);
    if (BSON_ITER_HOLDS_UTF8(&it))  // errmsg (and $err, ns from some servers)
      AppendString(out.mut(), key, ReplaceAll(bson_iter_utf8(&it, nullptr), stored, logical));
    else AppendValue(out.mut(), key, it);
  }
  return out;
}

void CopyClusterFields(const Doc& from, bson_t* to) {
  for (const char* key : {"$clusterTime", "operationTime"}) {
    if (auto v = Find(from.get(), key)) AppendValue(to, key, *v);
  }
}

}  // namespace remold
