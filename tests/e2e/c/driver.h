// libmongoc helpers for the e2e tests: RAII handles, a small BSON value type
// with lookups, an APM command recorder, and the DriverTest fixture.
//
// DriverTest gives every test its own database (dropped afterwards), a client
// pool on the harness's server URI (no directConnection: the driver runs its
// topology discovery through remold) with APM recording, and checks after
// each test that remold is still running.
#pragma once

#include <gtest/gtest.h>
#include <mongoc/mongoc.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace e2e {

template <auto Destroy>
struct Destroyer {
  template <class T>
  void operator()(T* handle) const { Destroy(handle); }
};
using UriPtr = std::unique_ptr<mongoc_uri_t, Destroyer<mongoc_uri_destroy>>;
using ClientPtr = std::unique_ptr<mongoc_client_t, Destroyer<mongoc_client_destroy>>;
using PoolPtr = std::unique_ptr<mongoc_client_pool_t, Destroyer<mongoc_client_pool_destroy>>;
using CollectionPtr = std::unique_ptr<mongoc_collection_t, Destroyer<mongoc_collection_destroy>>;
using CursorPtr = std::unique_ptr<mongoc_cursor_t, Destroyer<mongoc_cursor_destroy>>;
using BulkPtr = std::unique_ptr<mongoc_bulk_operation_t, Destroyer<mongoc_bulk_operation_destroy>>;
using ReadPrefsPtr = std::unique_ptr<mongoc_read_prefs_t, Destroyer<mongoc_read_prefs_destroy>>;
using ServerDescriptionPtr =
    std::unique_ptr<mongoc_server_description_t, Destroyer<mongoc_server_description_destroy>>;

// An owned BSON document. out() hands libmongoc an empty document to fill
// (for `bson_t *reply` parameters).
class Bson {
 public:
  Bson();
  explicit Bson(const bson_t* source);
  Bson(const Bson& other) : Bson(other.get()) {}
  Bson(Bson&&) = default;
  Bson& operator=(Bson other) {
    doc_ = std::move(other.doc_);
    return *this;
  }

  const bson_t* get() const { return doc_.get(); }
  bson_t* get() { return doc_.get(); }
  bson_t* out();

  // Relaxed Extended JSON, libbson's own spelling (stable for comparisons).
  std::string Json() const;
  // Canonical Extended JSON: keeps int32/int64/double apart.
  std::string CanonicalJson() const;

  // Dotted-path lookups; nullopt when the field is missing.
  bool Has(const char* path) const;
  std::optional<int64_t> Int(const char* path) const;  // any numeric type
  std::optional<std::string> Str(const char* path) const;
  std::optional<Bson> Doc(const char* path) const;     // document or array
  std::vector<Bson> DocArray(const char* path) const;  // array of documents
  std::vector<int64_t> IntArray(const char* path) const;

  // Appenders, for building documents with computed values.
  Bson& Add(const char* key, int32_t value);
  Bson& Add(const char* key, int64_t value);
  Bson& Add(const char* key, double value);
  Bson& Add(const char* key, bool value);
  Bson& Add(const char* key, const char* value);
  Bson& Add(const char* key, const std::string& value);
  Bson& Add(const char* key, const Bson& document);
  Bson& AddArray(const char* key, const std::vector<Bson>& documents);

 private:
  struct Free {
    void operator()(bson_t* doc) const;
  };
  std::unique_ptr<bson_t, Free> doc_;
};

// Parses relaxed or canonical Extended JSON; a parse error fails the test.
Bson Json(std::string_view json);
// Relaxed JSON of a JSON text, normalised by libbson, for comparisons.
std::string Normalized(std::string_view json);

std::vector<const bson_t*> Pointers(const std::vector<Bson>& documents);
// Reads a cursor to its end; a cursor error fails the test.
std::vector<Bson> Drain(mongoc_cursor_t* cursor);
std::vector<std::string> ToJson(const std::vector<Bson>& documents);

// A URI with the suite's short timeouts (and optional compressors).
UriPtr TestUri(const std::string& text, const char* compressors = nullptr);
UriPtr ServerUri();   // TestUri of what the tests connect to
UriPtr BackendUri();  // TestUri of the backend itself
ClientPtr NewClient(const mongoc_uri_t* uri);
// The server description libmongoc selected for writes.
ServerDescriptionPtr SelectedServer(mongoc_client_t* client);

enum class Phase { kStarted, kSucceeded, kFailed };

struct CommandEvent {
  Phase phase;
  std::string name;
  Bson body;  // the command when started, the reply otherwise
};

// Records APM command events from a pool or a client; thread-safe.
class CommandLog {
 public:
  void Attach(mongoc_client_pool_t* pool);
  void Attach(mongoc_client_t* client);
  std::vector<CommandEvent> Events(std::string_view name, Phase phase) const;
  size_t Count(std::string_view name, Phase phase) const { return Events(name, phase).size(); }
  void Clear();

 private:
  static mongoc_apm_callbacks_t* NewCallbacks();
  void Record(Phase phase, const char* name, const bson_t* body);

  mutable std::mutex mutex_;
  std::vector<CommandEvent> events_;
};

// A database name unique to the running test (and process).
std::string TestDatabaseName(std::string_view suffix = "");

class DriverTest : public testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // The URI the fixture's pool connects to; the harness's server by default.
  virtual UriPtr MakeUri() { return ServerUri(); }

  mongoc_client_t* client() { return client_; }
  const std::string& db_name() const { return db_name_; }
  CollectionPtr Collection(const char* name = "c");
  // Inserts documents with insert_many; failure fails the test.
  void InsertAll(mongoc_collection_t* collection, const std::vector<Bson>& documents);
  // Runs a command on this test's database; nullopt (and the error) on failure.
  std::optional<Bson> RunCommand(const Bson& command, bson_error_t* error = nullptr);

  CommandLog log_;
  PoolPtr pool_;

 private:
  mongoc_client_t* client_ = nullptr;
  std::string db_name_;
};

}  // namespace e2e
