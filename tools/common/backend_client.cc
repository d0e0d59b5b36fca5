#include "tools/common/backend_client.h"

#include <mongoc/mongoc.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <vector>

#include "common/doc.h"

namespace remold {
namespace {

// libmongoc is initialised once per process and cleaned up at exit.
struct MongocLibrary {
  MongocLibrary() {
    mongoc_init();
    mongoc_log_set_handler(&LogWarnings, nullptr);
  }
  ~MongocLibrary() { mongoc_cleanup(); }

  static void LogWarnings(mongoc_log_level_t level, const char* domain, const char* message, void*) {
    if (level <= MONGOC_LOG_LEVEL_WARNING) std::fprintf(stderr, "remold reconcile: %s: %s\n", domain, message);
  }
};

void EnsureMongoc() { static MongocLibrary library; }

struct CollectionDeleter {
  void operator()(mongoc_collection_t* c) const { mongoc_collection_destroy(c); }
};
struct CursorDeleter {
  void operator()(mongoc_cursor_t* c) const { mongoc_cursor_destroy(c); }
};
using Collection = std::unique_ptr<mongoc_collection_t, CollectionDeleter>;
using Cursor = std::unique_ptr<mongoc_cursor_t, CursorDeleter>;

// A reply filled in by libmongoc, destroyed on every path.
class Reply {
 public:
  Reply() { bson_init(&reply_); }
  ~Reply() { bson_destroy(&reply_); }
  Reply(const Reply&) = delete;
  Reply& operator=(const Reply&) = delete;
  bson_t* get() { return &reply_; }

 private:
  bson_t reply_;
};

std::string Lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

// The key=value pairs after '?' whose key (case-insensitively) is wanted.
std::vector<std::string> PassThroughOptions(std::string_view uri) {
  std::vector<std::string> kept;
  size_t question = uri.find('?');
  if (question == std::string_view::npos) return kept;
  std::string_view query = uri.substr(question + 1);
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    std::string key = Lower(pair.substr(0, pair.find('=')));
    if (key == "replicaset" || key == "directconnection") kept.emplace_back(pair);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
  }
  return kept;
}


Collection OpenCollection(mongoc_client_t* client, const Namespace& ns) {
  return Collection(mongoc_client_get_collection(client, ns.db.c_str(), ns.collection.c_str()));
}

void Drain(mongoc_cursor_t* cursor, const Namespace& ns, const BackendClient::DocumentFn& each) {
  const bson_t* document = nullptr;
  while (mongoc_cursor_next(cursor, &document)) each(DocumentView{document});
  bson_error_t error;
  if (mongoc_cursor_error(cursor, &error)) throw BackendError(ns.full() + ": " + error.message);
}

}  // namespace

std::string MongocUri(std::string_view backend_uri, const BackendOptions& backend,
                      std::string_view app_name) {
  std::string uri = "mongodb://";
  for (size_t i = 0; i < backend.hosts.size(); ++i) uri += (i ? "," : "") + HostPortText(backend.hosts[i]);
  uri += "/?appname=" + std::string(app_name);
  uri += "&connectTimeoutMS=" + std::to_string(backend.connect_timeout.count());
  for (const std::string& option : PassThroughOptions(backend_uri)) uri += "&" + option;
  return uri;
}

BackendClient::BackendClient(const std::string& mongoc_uri) {
  EnsureMongoc();
  bson_error_t error;
  mongoc_uri_t* uri = mongoc_uri_new_with_error(mongoc_uri.c_str(), &error);
  if (!uri) throw BackendError(std::string("backend URI: ") + error.message);
  client_ = mongoc_client_new_from_uri_with_error(uri, &error);
  mongoc_uri_destroy(uri);
  if (!client_) throw BackendError(std::string("backend URI: ") + error.message);
  mongoc_client_set_error_api(client_, MONGOC_ERROR_API_VERSION_2);
}

BackendClient::~BackendClient() { mongoc_client_destroy(client_); }

void BackendClient::Ping() {
  Doc command;
  bson_append_int32(command.mut(), "ping", -1, 1);
  Reply reply;
  bson_error_t error;
  if (!mongoc_client_command_simple(client_, "admin", command.get(), nullptr, reply.get(), &error))
    throw BackendError(error.message);
}

std::optional<int64_t> BackendClient::EstimatedCount(const Namespace& ns) {
  Collection collection = OpenCollection(client_, ns);
  bson_error_t error;
  int64_t count = mongoc_collection_estimated_document_count(collection.get(), nullptr, nullptr, nullptr, &error);
  if (count < 0) return std::nullopt;
  return count;
}

int64_t BackendClient::CountDocuments(const Namespace& ns, const bson_t* filter, int64_t limit) {
  Collection collection = OpenCollection(client_, ns);
  Doc options;
  BSON_APPEND_INT64(options.mut(), "limit", limit);
  bson_error_t error;
  const int64_t count =
      mongoc_collection_count_documents(collection.get(), filter, options.get(), nullptr, nullptr, &error);
  if (count < 0) throw BackendError(ns.full() + ": " + error.message);
  return count;
}

void BackendClient::Find(const Namespace& ns, const bson_t* filter, const bson_t* options,
                         const DocumentFn& each) {
  Collection collection = OpenCollection(client_, ns);
  Cursor cursor(mongoc_collection_find_with_opts(collection.get(), filter, options, nullptr));
  Drain(cursor.get(), ns, each);
}

void BackendClient::Aggregate(const Namespace& ns, const bson_t* pipeline, const DocumentFn& each) {
  Collection collection = OpenCollection(client_, ns);
  Doc options;
  bson_append_bool(options.mut(), "allowDiskUse", -1, true);
  Cursor cursor(mongoc_collection_aggregate(collection.get(), MONGOC_QUERY_NONE, pipeline, options.get(), nullptr));
  Drain(cursor.get(), ns, each);
}

UpdateResult BackendClient::UpdateOne(const Namespace& ns, const bson_t* filter, const bson_t* update,
                                      bool upsert) {
  Collection collection = OpenCollection(client_, ns);
  Doc options;
  if (upsert) bson_append_bool(options.mut(), "upsert", -1, true);
  Reply reply;
  bson_error_t error;
  if (!mongoc_collection_update_one(collection.get(), filter, update, options.get(), reply.get(), &error))
    throw BackendError(error.message);
  UpdateResult result;
  result.matched = FindInteger(reply.get(), "matchedCount").value_or(0);
  result.upserted = FindInteger(reply.get(), "upsertedCount").value_or(0);
  return result;
}

BatchUpdateResult BackendClient::UpdateBatch(const Namespace& ns, const std::vector<Doc>& statements) {
  BatchWriteResult written = WriteBatch(ns, "update", statements);
  BatchUpdateResult result;
  result.matched = written.n;
  for (const WriteFailure& failure : written.errors)
    result.errors.push_back("statement " + std::to_string(failure.index) + ": " + failure.message);
  return result;
}

void BackendClient::CreateIndex(const Namespace& ns, const bson_t* key, const std::string& name) {
  Doc command, index;
  AppendString(command.mut(), "createIndexes", ns.collection);
  BSON_APPEND_DOCUMENT(index.mut(), "key", key);
  AppendString(index.mut(), "name", name);
  AppendArray(command.mut(), "indexes", {index});
  Reply reply;
  bson_error_t error;
  if (!mongoc_client_write_command_with_opts(client_, ns.db.c_str(), command.get(), nullptr, reply.get(), &error))
    throw BackendError(ns.full() + ": creating index " + name + ": " + error.message);
}

void BackendClient::DropIndex(const Namespace& ns, const std::string& name) {
  Doc command;
  AppendString(command.mut(), "dropIndexes", ns.collection);
  AppendString(command.mut(), "index", name);
  Reply reply;
  bson_error_t error;
  // IndexNotFound (27) and NamespaceNotFound (26): nothing to drop.
  if (!mongoc_client_write_command_with_opts(client_, ns.db.c_str(), command.get(), nullptr, reply.get(), &error) &&
      error.code != 27 && error.code != 26)
    throw BackendError(ns.full() + ": dropping index " + name + ": " + error.message);
}

BatchWriteResult BackendClient::WriteBatch(const Namespace& ns, std::string_view kind, const std::vector<Doc>& items) {
  const char* items_key = kind == "insert" ? "documents" : kind == "update" ? "updates" : "deletes";
  Doc command;
  AppendString(command.mut(), kind, ns.collection);
  AppendArray(command.mut(), items_key, items);
  BSON_APPEND_BOOL(command.mut(), "ordered", false);
  Reply reply;
  bson_error_t error;
  if (!mongoc_client_write_command_with_opts(client_, ns.db.c_str(), command.get(), nullptr, reply.get(), &error))
    throw BackendError(ns.full() + ": " + error.message);
  BatchWriteResult result;
  result.n = FindInteger(reply.get(), "n").value_or(0);
  if (auto errors = ::remold::Find(reply.get(), "writeErrors"); errors && BSON_ITER_HOLDS_ARRAY(&*errors)) {
    for (const Doc& e : ArrayDocuments(*errors))
      result.errors.push_back({FindInteger(e.get(), "index").value_or(-1),
                               static_cast<int32_t>(FindInteger(e.get(), "code").value_or(8)),
                               FindString(e.get(), "errmsg").value_or("write error")});
  }
  return result;
}

}  // namespace remold
