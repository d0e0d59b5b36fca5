// A synchronous connection to the backend for the offline tools (tools/),
// over libmongoc: the only file of tools/ that speaks to a server.
//
// Every failure throws BackendError with the server's or driver's message.
// Single-threaded: one BackendClient per thread.
#pragma once

#include <bson/bson.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "common/doc.h"
#include "proxy/backend_uri.h"
#include "rules/rule.h"

struct _mongoc_client_t;

namespace remold {

class BackendError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The libmongoc URI for remold's backend URI: its hosts and connect timeout,
// and its replicaSet / directConnection options (remold itself ignores
// them; the driver uses them to find the primary). `app_name` (the tool's
// program name) is what the server logs for each connection.
std::string MongocUri(std::string_view backend_uri, const BackendOptions& backend,
                      std::string_view app_name);

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
  int64_t n = 0;
  std::vector<WriteFailure> errors;
};

// The server's code for a duplicate key.
inline constexpr int32_t kDuplicateKey = 11000;

// A count limit that counts every document.
inline constexpr int64_t kCountAll = int64_t{1} << 53;

class BackendClient {
 public:
  using DocumentFn = std::function<void(DocumentView)>;

  explicit BackendClient(const std::string& mongoc_uri);
  ~BackendClient();
  BackendClient(const BackendClient&) = delete;
  BackendClient& operator=(const BackendClient&) = delete;

  // Checks that the backend answers.
  void Ping();
  // The collection's document count from metadata; nullopt when unknown.
  std::optional<int64_t> EstimatedCount(const Namespace& ns);
  // Calls `each` for every document find(filter, options) returns.
  void Find(const Namespace& ns, const bson_t* filter, const bson_t* options, const DocumentFn& each);
  // Runs `pipeline` (a BSON array) with allowDiskUse and calls `each` per result.
  void Aggregate(const Namespace& ns, const bson_t* pipeline, const DocumentFn& each);
  // How many documents match `filter`, counting up to `limit`
  // (kCountAll: all of them).
  int64_t CountDocuments(const Namespace& ns, const bson_t* filter, int64_t limit);
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

 private:
  _mongoc_client_t* client_ = nullptr;
};

}  // namespace remold
