// A synchronous client of the backend for remold's own work: the offline
// tools (tools/), `remold check --backend` and the start-up count of
// documents not in a rule's form. It runs as remold's own identity
// (proxy/wire/backend_identity.h), on the primary: libmongoc finds it
// (monitoring needs no identity), and one WireConnection
// (tools/common/wire_connection.h) to it carries every command, opened
// again after a failure of the link.
//
// Every failure throws BackendError with the server's or the link's
// message. Single-threaded: one BackendClient per thread.
#pragma once

#include <bson/bson.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "common/doc.h"
#include "proxy/wire/backend_identity.h"
#include "proxy/wire/backend_uri.h"
#include "ruleset/rule.h"
#include "tools/common/backend_error.h"
#include "tools/common/wire_connection.h"

struct _mongoc_client_t;

namespace remold {

// One document of a result, valid during the callback (a wrapper: libbson's
// bson_t carries an alignment attribute that std::function's signature
// would drop).
struct DocumentView {
  const bson_t* bson;
};

struct UpdateResult {
  int64_t matched = 0;
  int64_t upserted = 0;
};

// What an unordered update of several statements did.
struct BatchUpdateResult {
  int64_t matched = 0;
  std::vector<std::string> errors;  // "statement N: <errmsg>", one per write error
};

// What an unordered write command did: its n, and each write error.
struct WriteFailure {
  int64_t index = -1;  // of the statement or document
  int32_t code = 0;
  std::string message;
};
struct BatchWriteResult {
  int64_t n = 0;         // matched and upserted, for an update
  int64_t upserted = 0;
  std::vector<WriteFailure> errors;
};

// The server's code for a duplicate key.
inline constexpr int32_t kDuplicateKey = 11000;

// A count limit that counts every document.
inline constexpr int64_t kCountAll = int64_t{1} << 53;

class BackendClient {
 public:
  using DocumentFn = std::function<void(DocumentView)>;

  // `app_name` (the tool's program name) is what the server logs. Nothing
  // is contacted before the first command.
  BackendClient(const BackendOptions& backend, const BackendIdentity& identity, std::string_view app_name);
  ~BackendClient();
  BackendClient(const BackendClient&) = delete;
  BackendClient& operator=(const BackendClient&) = delete;

  // Checks that the backend answers.
  void Ping();
  // The collection's document count from metadata; nullopt when unknown.
  std::optional<int64_t> EstimatedCount(const Namespace& ns);
  // Calls `each` for every document find(filter, options) returns.
  void Find(const Namespace& ns, const bson_t* filter, const bson_t* options, const DocumentFn& each);
  // Runs `pipeline` ({pipeline: [...]}, or the array itself) with allowDiskUse
  // and calls `each` per result.
  void Aggregate(const Namespace& ns, const bson_t* pipeline, const DocumentFn& each);
  // How many documents match `filter`, counting up to `limit`
  // (kCountAll: all of them).
  int64_t CountDocuments(const Namespace& ns, const bson_t* filter, int64_t limit);
  // How many documents `stages` (a pipeline on `ns`) outputs, up to `limit`.
  int64_t CountPipeline(const Namespace& ns, const std::vector<Doc>& stages, int64_t limit);
  UpdateResult UpdateOne(const Namespace& ns, const bson_t* filter, const bson_t* update, bool upsert);
  // One unordered update command of `statements` ({q, u, multi}), in one
  // round trip.
  BatchUpdateResult UpdateBatch(const Namespace& ns, const std::vector<Doc>& statements);
  // Creates the index `key` named `name` on `ns` (nothing when it exists).
  void CreateIndex(const Namespace& ns, const bson_t* key, const std::string& name);
  // Drops the index `name` of `ns`; a missing one is no error.
  void DropIndex(const Namespace& ns, const std::string& name);
  // One unordered write command: `kind` "insert" (documents), "update"
  // (statements) or "delete" (statements), in one round trip.
  BatchWriteResult WriteBatch(const Namespace& ns, std::string_view kind, const std::vector<Doc>& items);
  // The reply of `command` (without $db) on `db`, as the server gives it:
  // ok: 0 too (a plan's command that may fail). Throws BackendError only
  // when the link fails.
  Doc Reply(const std::string& db, const Doc& command);

 private:
  // The connection to the primary, opened when there is none.
  WireConnection& Connection();
  // The reply of `command` on `db`; throws BackendError("<what>: <errmsg>")
  // when the server refuses it.
  Doc Command(const std::string& db, const Doc& command, const std::string& what);
  // Calls `each` for every document of the cursor `reply` opens on `ns`.
  void Drain(const Namespace& ns, const Doc& reply, const DocumentFn& each);

  BackendOptions backend_;
  BackendIdentity identity_;
  std::string app_name_;
  _mongoc_client_t* selector_ = nullptr;  // finds the primary; never authenticates
  std::unique_ptr<WireConnection> connection_;
};

}  // namespace remold
