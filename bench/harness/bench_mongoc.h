// The mongo-c-driver side the pattern benches share: owning pointers,
// JSON <-> BSON, one connected client, commands, checked inserts.
//
// Contract:
//   - json() parses relaxed extended JSON written in the bench and throws
//     std::runtime_error on bad JSON; to_json() never throws.
//   - number_at() is the number at a dotted path, std::nullopt when the path
//     is missing or not a number.
//   - connect() returns one handshaken connection (directConnection, error
//     API v2) to HOST:PORT, so no timed op pays for connecting; it throws
//     std::runtime_error when the endpoint does not answer a ping.
//     mongoc_client_t is single-threaded: one client per thread.
//   - run_command() reports failure in its result; command() throws
//     std::runtime_error on failure unless `allow_failure`.
//   - Documents owns the documents added to it (bson_new()'d) and keeps
//     them contiguous, as insert_many() takes them.
//   - insert_many() sends one insertMany and is ok only when the driver
//     reports success and insertedCount equals `count`; otherwise `error`
//     says why (with the reply). delete_all() empties a collection with a
//     delete (no drop) and throws std::runtime_error on failure.
//   - update_one_matching() sends one update_one that must match exactly
//     one document: false with the driver's error, or with "WHAT ID
//     matched REPLY" in error->message when it matched another number.
//   - run_main() wraps a bench's run between mongoc_init() and
//     mongoc_cleanup(): it returns what `run` returns, or 1 after printing
//     "PROGRAM: fatal: what" to stderr when `run` throws.
#pragma once

#include <bson/bson.h>
#include <mongoc/mongoc.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace bench_common {

struct BsonDeleter {
  void operator()(bson_t* b) const { bson_destroy(b); }
};
using BsonPtr = std::unique_ptr<bson_t, BsonDeleter>;

struct ClientDeleter {
  void operator()(mongoc_client_t* c) const { mongoc_client_destroy(c); }
};
using ClientPtr = std::unique_ptr<mongoc_client_t, ClientDeleter>;

struct CollectionDeleter {
  void operator()(mongoc_collection_t* c) const { mongoc_collection_destroy(c); }
};
using CollectionPtr = std::unique_ptr<mongoc_collection_t, CollectionDeleter>;
// A collection handle an operation closure can hold (closures are copied).
using SharedCollection = std::shared_ptr<mongoc_collection_t>;

CollectionPtr collection(mongoc_client_t* client, const char* db, const char* name);
SharedCollection shared_collection(mongoc_client_t* client, const char* db, const char* name);

class Documents {
 public:
  Documents() = default;
  Documents(const Documents&) = delete;
  Documents& operator=(const Documents&) = delete;
  Documents(Documents&& other) noexcept : docs_(std::move(other.docs_)) {}
  ~Documents();

  void reserve(size_t n) { docs_.reserve(n); }
  void add(bson_t* doc) { docs_.push_back(doc); }
  size_t size() const { return docs_.size(); }
  const bson_t* const* data() const { return docs_.data(); }
  const bson_t* operator[](size_t i) const { return docs_[i]; }

 private:
  std::vector<bson_t*> docs_;
};

BsonPtr json(const std::string& text);
std::string to_json(const bson_t* doc);
std::optional<double> number_at(const bson_t* doc, const char* path);

// `appname` names the bench in the server's logs.
ClientPtr connect(const std::string& endpoint, const char* appname);

struct CommandResult {
  bool ok = false;
  BsonPtr reply;
  bson_error_t error{};
};

CommandResult run_command(mongoc_client_t* client, const char* db, const bson_t* cmd);
BsonPtr command(mongoc_client_t* client, const char* db, const bson_t* cmd,
                bool allow_failure = false);

struct InsertResult {
  bool ok = false;
  int64_t inserted = 0;
  std::string error;
};

InsertResult insert_many(mongoc_collection_t* collection, const bson_t* const* docs, size_t count,
                         const bson_t* opts);
void delete_all(mongoc_client_t* client, const char* db, const char* collection);
bool update_one_matching(mongoc_collection_t* collection, const bson_t* selector, const bson_t* update,
                         const char* what, long long id, bson_error_t* error);
// The exact number of documents of `collection` (an aggregate that counts
// them, never the `count` command: DocumentDB answers a `count` without a
// query from its statistics, docs/backends.md departure 7); -1 with `error`
// set when the read fails.
int64_t count_all(mongoc_client_t* client, const char* db, const char* collection, std::string* error);

int run_main(const char* program, const std::function<int()>& run);

}  // namespace bench_common
