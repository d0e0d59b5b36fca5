#include "tools/common/backend_client.h"

#include <mongoc/mongoc.h>

#include <cstdio>

#include "proxy/routing/own_connection_uri.h"

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
    if (level <= MONGOC_LOG_LEVEL_WARNING) std::fprintf(stderr, "remold: %s: %s\n", domain, message);
  }
};

void EnsureMongoc() { static MongocLibrary library; }

bool IsOk(const Doc& reply) { return FindBool(reply.get(), "ok").value_or(false); }

std::vector<Doc> Batch(const Doc& cursor, const char* name) {
  std::optional<bson_iter_t> batch = Find(cursor.get(), name);
  if (!batch || !BSON_ITER_HOLDS_ARRAY(&*batch)) return {};
  return ArrayDocuments(*batch);
}

}  // namespace

BackendClient::BackendClient(const BackendOptions& backend, const BackendIdentity& identity,
                             std::string_view app_name)
    : backend_(backend), identity_(identity), app_name_(app_name) {
  EnsureMongoc();
  std::string problem;
  MongocUriPtr uri = OwnConnectionUri(backend, BackendIdentity{}, app_name, problem);
  if (!uri) throw BackendError("backend: " + problem);
  bson_error_t error;
  selector_ = mongoc_client_new_from_uri_with_error(uri.get(), &error);
  if (!selector_) throw BackendError(std::string("backend URI: ") + error.message);
  mongoc_client_set_error_api(selector_, MONGOC_ERROR_API_VERSION_2);
}

BackendClient::~BackendClient() { mongoc_client_destroy(selector_); }

WireConnection& BackendClient::Connection() {
  if (connection_) return *connection_;
  bson_error_t error;
  mongoc_server_description_t* server = mongoc_client_select_server(selector_, true, nullptr, &error);
  if (!server) throw BackendError(std::string("no primary to work on: ") + error.message);
  const mongoc_host_list_t* host = mongoc_server_description_host(server);
  const HostAndPort address{host->host, host->port};
  mongoc_server_description_destroy(server);
  connection_ = std::make_unique<WireConnection>(address, backend_, identity_, app_name_);
  return *connection_;
}

Doc BackendClient::Reply(const std::string& db, const Doc& command) {
  try {
    return Connection().Run(db, command);
  } catch (const BackendError&) {
    connection_.reset();  // the next command opens another
    throw;
  }
}

Doc BackendClient::Command(const std::string& db, const Doc& command, const std::string& what) {
  Doc reply;
  try {
    reply = Connection().Run(db, command);
  } catch (const BackendError&) {
    connection_.reset();  // the next command opens another
    throw;
  }
  if (!IsOk(reply))
    throw BackendError(what + ": " + FindString(reply.get(), "errmsg").value_or("command failed"),
                       static_cast<int32_t>(FindInteger(reply.get(), "code").value_or(0)));
  if (std::optional<Doc> concern = FindDocument(reply.get(), "writeConcernError"))
    throw BackendError(what + ": write concern: " + FindString(concern->get(), "errmsg").value_or("failed"),
                       static_cast<int32_t>(FindInteger(concern->get(), "code").value_or(0)));
  return reply;
}

void BackendClient::Drain(const Namespace& ns, const Doc& reply, const DocumentFn& each) {
  std::optional<Doc> cursor = FindDocument(reply.get(), "cursor");
  if (!cursor) throw BackendError(ns.full() + ": a reply without a cursor");
  int64_t id = FindInteger(cursor->get(), "id").value_or(0);
  std::vector<Doc> batch = Batch(*cursor, "firstBatch");
  try {
    while (true) {
      for (const Doc& document : batch) each(DocumentView{document.get()});
      if (id == 0) return;
      Doc more;
      BSON_APPEND_INT64(more.mut(), "getMore", id);
      AppendString(more.mut(), "collection", ns.collection);
      Doc next = Command(ns.db, more, ns.full());
      cursor = FindDocument(next.get(), "cursor");
      if (!cursor) throw BackendError(ns.full() + ": a getMore reply without a cursor");
      id = FindInteger(cursor->get(), "id").value_or(0);
      batch = Batch(*cursor, "nextBatch");
    }
  } catch (...) {
    if (id != 0 && connection_) {  // `each` stopped early: the server need not keep the cursor
      Doc kill;
      AppendString(kill.mut(), "killCursors", ns.collection);
      bson_t ids;
      bson_append_array_begin(kill.mut(), "cursors", -1, &ids);
      BSON_APPEND_INT64(&ids, "0", id);
      bson_append_array_end(kill.mut(), &ids);
      try {
        connection_->Run(ns.db, kill);
      } catch (const BackendError&) {
        connection_.reset();
      }
    }
    throw;
  }
}

void BackendClient::Ping() {
  Doc command;
  BSON_APPEND_INT32(command.mut(), "ping", 1);
  Command("admin", command, "ping");
}

std::optional<int64_t> BackendClient::EstimatedCount(const Namespace& ns) {
  Doc command;
  AppendString(command.mut(), "count", ns.collection);
  try {
    return FindInteger(Command(ns.db, command, ns.full()).get(), "n");
  } catch (const BackendError&) {
    return std::nullopt;
  }
}

int64_t BackendClient::CountDocuments(const Namespace& ns, const bson_t* filter, int64_t limit) {
  Doc match;
  BSON_APPEND_DOCUMENT(match.mut(), "$match", filter);
  return CountPipeline(ns, {match}, limit);
}

int64_t BackendClient::CountPipeline(const Namespace& ns, const std::vector<Doc>& stages, int64_t limit) {
  Doc limit_stage, group, count_spec, sum;
  BSON_APPEND_INT64(limit_stage.mut(), "$limit", limit);
  BSON_APPEND_INT32(sum.mut(), "$sum", 1);
  BSON_APPEND_INT32(count_spec.mut(), "_id", 1);
  AppendDoc(count_spec.mut(), "n", sum);
  AppendDoc(group.mut(), "$group", count_spec);
  std::vector<Doc> pipeline = stages;
  pipeline.push_back(std::move(limit_stage));
  pipeline.push_back(std::move(group));
  Doc command, cursor;
  AppendString(command.mut(), "aggregate", ns.collection);
  AppendArray(command.mut(), "pipeline", pipeline);
  BSON_APPEND_BOOL(command.mut(), "allowDiskUse", true);
  AppendDoc(command.mut(), "cursor", cursor);
  int64_t count = 0;
  Drain(ns, Command(ns.db, command, ns.full()),
        [&](DocumentView result) { count = FindInteger(result.bson, "n").value_or(0); });
  return count;
}

void BackendClient::Find(const Namespace& ns, const bson_t* filter, const bson_t* options,
                         const DocumentFn& each) {
  Doc command;
  AppendString(command.mut(), "find", ns.collection);
  BSON_APPEND_DOCUMENT(command.mut(), "filter", filter);
  if (options) bson_concat(command.mut(), options);
  Drain(ns, Command(ns.db, command, ns.full()), each);
}

void BackendClient::Aggregate(const Namespace& ns, const bson_t* pipeline, const DocumentFn& each) {
  Doc command, cursor;
  AppendString(command.mut(), "aggregate", ns.collection);
  // {pipeline: [...]}, as libmongoc takes it, or the array itself.
  if (std::optional<bson_iter_t> stages = ::remold::Find(pipeline, "pipeline"); stages && BSON_ITER_HOLDS_ARRAY(&*stages))
    AppendValue(command.mut(), "pipeline", *stages);
  else
    BSON_APPEND_ARRAY(command.mut(), "pipeline", pipeline);
  BSON_APPEND_BOOL(command.mut(), "allowDiskUse", true);
  AppendDoc(command.mut(), "cursor", cursor);
  Drain(ns, Command(ns.db, command, ns.full()), each);
}

UpdateResult BackendClient::UpdateOne(const Namespace& ns, const bson_t* filter, const bson_t* update,
                                      bool upsert) {
  Doc statement;
  BSON_APPEND_DOCUMENT(statement.mut(), "q", filter);
  BSON_APPEND_DOCUMENT(statement.mut(), "u", update);
  if (upsert) BSON_APPEND_BOOL(statement.mut(), "upsert", true);
  BatchWriteResult written = WriteBatch(ns, "update", {statement});
  if (!written.errors.empty()) throw BackendError(ns.full() + ": " + written.errors.front().message,
                                                  written.errors.front().code);
  UpdateResult result;
  result.upserted = written.upserted;
  result.matched = written.n - written.upserted;
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
  Command(ns.db, command, ns.full() + ": creating index " + name);
}

void BackendClient::DropIndex(const Namespace& ns, const std::string& name) {
  Doc command;
  AppendString(command.mut(), "dropIndexes", ns.collection);
  AppendString(command.mut(), "index", name);
  try {
    Command(ns.db, command, ns.full() + ": dropping index " + name);
  } catch (const BackendError& e) {
    if (e.code() != 27 && e.code() != 26) throw;  // IndexNotFound, NamespaceNotFound: nothing to drop
  }
}

BatchWriteResult BackendClient::WriteBatch(const Namespace& ns, std::string_view kind, const std::vector<Doc>& items) {
  const char* items_key = kind == "insert" ? "documents" : kind == "update" ? "updates" : "deletes";
  Doc command;
  AppendString(command.mut(), kind, ns.collection);
  AppendArray(command.mut(), items_key, items);
  BSON_APPEND_BOOL(command.mut(), "ordered", false);
  const Doc reply = Command(ns.db, command, ns.full());
  BatchWriteResult result;
  result.n = FindInteger(reply.get(), "n").value_or(0);
  if (auto upserted = ::remold::Find(reply.get(), "upserted"); upserted && BSON_ITER_HOLDS_ARRAY(&*upserted))
    result.upserted = static_cast<int64_t>(ArrayDocuments(*upserted).size());
  if (auto errors = ::remold::Find(reply.get(), "writeErrors"); errors && BSON_ITER_HOLDS_ARRAY(&*errors)) {
    for (const Doc& e : ArrayDocuments(*errors))
      result.errors.push_back({FindInteger(e.get(), "index").value_or(-1),
                               static_cast<int32_t>(FindInteger(e.get(), "code").value_or(8)),
                               FindString(e.get(), "errmsg").value_or("write error")});
  }
  return result;
}

}  // namespace remold
