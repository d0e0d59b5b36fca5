// libmongoc helpers and the DriverTest fixture (see driver.h).

#include "driver.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <functional>

#include "harness.h"

namespace e2e {
namespace {

constexpr int32_t kServerSelectionTimeoutMs = 5000;
constexpr int32_t kConnectTimeoutMs = 5000;
constexpr int32_t kSocketTimeoutMs = 30000;

std::string TakeJson(char* json) {
  std::string result = json != nullptr ? json : "<invalid BSON>";
  bson_free(json);
  return result;
}

std::optional<bson_iter_t> Find(const bson_t* doc, const char* path) {
  bson_iter_t iter;
  bson_iter_t found;
  if (doc == nullptr || !bson_iter_init(&iter, doc) || !bson_iter_find_descendant(&iter, path, &found)) {
    return std::nullopt;
  }
  return found;
}

std::optional<Bson> Subdocument(const bson_iter_t& iter) {
  if (!BSON_ITER_HOLDS_DOCUMENT(&iter) && !BSON_ITER_HOLDS_ARRAY(&iter)) return std::nullopt;
  uint32_t length = 0;
  const uint8_t* data = nullptr;
  if (BSON_ITER_HOLDS_DOCUMENT(&iter)) {
    bson_iter_document(&iter, &length, &data);
  } else {
    bson_iter_array(&iter, &length, &data);
  }
  bson_t view;
  if (!bson_init_static(&view, data, length)) return std::nullopt;
  return Bson(&view);
}

bool IsNumber(const bson_iter_t& iter) {
  bson_type_t type = bson_iter_type(&iter);
  return type == BSON_TYPE_INT32 || type == BSON_TYPE_INT64 || type == BSON_TYPE_DOUBLE;
}

}  // namespace

// ---- Bson ----

void Bson::Free::operator()(bson_t* doc) const {
  bson_destroy(doc);
  delete doc;
}

Bson::Bson() : doc_(new bson_t) { bson_init(doc_.get()); }

Bson::Bson(const bson_t* source) : doc_(new bson_t) { bson_copy_to(source, doc_.get()); }

bson_t* Bson::out() {
  bson_destroy(doc_.get());
  bson_init(doc_.get());
  return doc_.get();
}

std::string Bson::Json() const { return TakeJson(bson_as_relaxed_extended_json(get(), nullptr)); }

std::string Bson::CanonicalJson() const { return TakeJson(bson_as_canonical_extended_json(get(), nullptr)); }

bool Bson::Has(const char* path) const { return Find(get(), path).has_value(); }

std::optional<int64_t> Bson::Int(const char* path) const {
  std::optional<bson_iter_t> iter = Find(get(), path);
  if (!iter || !IsNumber(*iter)) return std::nullopt;
  return bson_iter_as_int64(&*iter);
}

std::optional<std::string> Bson::Str(const char* path) const {
  std::optional<bson_iter_t> iter = Find(get(), path);
  if (!iter || !BSON_ITER_HOLDS_UTF8(&*iter)) return std::nullopt;
  return std::string(bson_iter_utf8(&*iter, nullptr));
}

std::optional<Bson> Bson::Doc(const char* path) const {
  std::optional<bson_iter_t> iter = Find(get(), path);
  if (!iter) return std::nullopt;
  return Subdocument(*iter);
}

std::vector<Bson> Bson::DocArray(const char* path) const {
  std::vector<Bson> result;
  std::optional<bson_iter_t> iter = Find(get(), path);
  bson_iter_t child;
  if (!iter || !BSON_ITER_HOLDS_ARRAY(&*iter) || !bson_iter_recurse(&*iter, &child)) return result;
  while (bson_iter_next(&child)) {
    if (std::optional<Bson> doc = Subdocument(child)) result.push_back(std::move(*doc));
  }
  return result;
}

std::vector<int64_t> Bson::IntArray(const char* path) const {
  std::vector<int64_t> result;
  std::optional<bson_iter_t> iter = Find(get(), path);
  bson_iter_t child;
  if (!iter || !BSON_ITER_HOLDS_ARRAY(&*iter) || !bson_iter_recurse(&*iter, &child)) return result;
  while (bson_iter_next(&child)) {
    if (IsNumber(child)) result.push_back(bson_iter_as_int64(&child));
  }
  return result;
}

Bson& Bson::Add(const char* key, int32_t value) {
  bson_append_int32(get(), key, -1, value);
  return *this;
}

Bson& Bson::Add(const char* key, int64_t value) {
  bson_append_int64(get(), key, -1, value);
  return *this;
}

Bson& Bson::Add(const char* key, double value) {
  bson_append_double(get(), key, -1, value);
  return *this;
}

Bson& Bson::Add(const char* key, bool value) {
  bson_append_bool(get(), key, -1, value);
  return *this;
}

Bson& Bson::Add(const char* key, const char* value) {
  bson_append_utf8(get(), key, -1, value, -1);
  return *this;
}

Bson& Bson::Add(const char* key, const std::string& value) {
  bson_append_utf8(get(), key, -1, value.data(), static_cast<int>(value.size()));
  return *this;
}

Bson& Bson::Add(const char* key, const Bson& document) {
  bson_append_document(get(), key, -1, document.get());
  return *this;
}

Bson& Bson::AddArray(const char* key, const std::vector<Bson>& documents) {
  bson_t array;
  bson_append_array_begin(get(), key, -1, &array);
  for (size_t i = 0; i < documents.size(); ++i) {
    std::string index = std::to_string(i);
    bson_append_document(&array, index.c_str(), -1, documents[i].get());
  }
  bson_append_array_end(get(), &array);
  return *this;
}

Bson Json(std::string_view json) {
  bson_error_t error;
  bson_t* parsed = bson_new_from_json(reinterpret_cast<const uint8_t*>(json.data()),
                                      static_cast<ssize_t>(json.size()), &error);
  if (parsed == nullptr) {
    ADD_FAILURE() << "bad JSON in test: " << error.message << "\n" << json;
    return Bson();
  }
  Bson result(parsed);
  bson_destroy(parsed);
  return result;
}

std::string Normalized(std::string_view json) { return Json(json).Json(); }

std::vector<const bson_t*> Pointers(const std::vector<Bson>& documents) {
  std::vector<const bson_t*> result;
  for (const Bson& doc : documents) result.push_back(doc.get());
  return result;
}

std::vector<Bson> Drain(mongoc_cursor_t* cursor) {
  std::vector<Bson> result;
  const bson_t* doc = nullptr;
  while (mongoc_cursor_next(cursor, &doc)) result.emplace_back(doc);
  bson_error_t error;
  EXPECT_FALSE(mongoc_cursor_error(cursor, &error)) << "cursor error: " << error.message;
  return result;
}

std::vector<std::string> ToJson(const std::vector<Bson>& documents) {
  std::vector<std::string> result;
  for (const Bson& doc : documents) result.push_back(doc.Json());
  return result;
}

// ---- connections ----

UriPtr TestUri(const std::string& text, const char* compressors) {
  bson_error_t error;
  UriPtr uri(mongoc_uri_new_with_error(text.c_str(), &error));
  EXPECT_TRUE(uri) << "bad URI " << text << ": " << error.message;
  if (!uri) return uri;
  mongoc_uri_set_option_as_int32(uri.get(), MONGOC_URI_SERVERSELECTIONTIMEOUTMS, kServerSelectionTimeoutMs);
  mongoc_uri_set_option_as_int32(uri.get(), MONGOC_URI_CONNECTTIMEOUTMS, kConnectTimeoutMs);
  mongoc_uri_set_option_as_int32(uri.get(), MONGOC_URI_SOCKETTIMEOUTMS, kSocketTimeoutMs);
  mongoc_uri_set_option_as_utf8(uri.get(), MONGOC_URI_APPNAME, "remold-e2e-c");
  if (compressors != nullptr) {
    EXPECT_TRUE(mongoc_uri_set_compressors(uri.get(), compressors)) << "libmongoc lacks " << compressors;
  }
  return uri;
}

UriPtr ServerUri() { return TestUri(harness::Current().server_uri); }

UriPtr BackendUri() { return TestUri(harness::Current().backend_uri); }

ClientPtr NewClient(const mongoc_uri_t* uri) {
  bson_error_t error;
  ClientPtr client(mongoc_client_new_from_uri_with_error(uri, &error));
  EXPECT_TRUE(client) << error.message;
  if (client) mongoc_client_set_error_api(client.get(), MONGOC_ERROR_API_VERSION_2);
  return client;
}

ServerDescriptionPtr SelectedServer(mongoc_client_t* client) {
  bson_error_t error;
  ServerDescriptionPtr server(mongoc_client_select_server(client, /*for_writes=*/true, nullptr, &error));
  EXPECT_TRUE(server) << "server selection failed: " << error.message;
  return server;
}

// ---- CommandLog ----

mongoc_apm_callbacks_t* CommandLog::NewCallbacks() {
  mongoc_apm_callbacks_t* callbacks = mongoc_apm_callbacks_new();
  mongoc_apm_set_command_started_cb(callbacks, [](const mongoc_apm_command_started_t* event) {
    static_cast<CommandLog*>(mongoc_apm_command_started_get_context(event))
        ->Record(Phase::kStarted, mongoc_apm_command_started_get_command_name(event),
                 mongoc_apm_command_started_get_command(event));
  });
  mongoc_apm_set_command_succeeded_cb(callbacks, [](const mongoc_apm_command_succeeded_t* event) {
    static_cast<CommandLog*>(mongoc_apm_command_succeeded_get_context(event))
        ->Record(Phase::kSucceeded, mongoc_apm_command_succeeded_get_command_name(event),
                 mongoc_apm_command_succeeded_get_reply(event));
  });
  mongoc_apm_set_command_failed_cb(callbacks, [](const mongoc_apm_command_failed_t* event) {
    static_cast<CommandLog*>(mongoc_apm_command_failed_get_context(event))
        ->Record(Phase::kFailed, mongoc_apm_command_failed_get_command_name(event),
                 mongoc_apm_command_failed_get_reply(event));
  });
  return callbacks;
}

void CommandLog::Attach(mongoc_client_pool_t* pool) {
  mongoc_apm_callbacks_t* callbacks = NewCallbacks();
  mongoc_client_pool_set_apm_callbacks(pool, callbacks, this);
  mongoc_apm_callbacks_destroy(callbacks);
}

void CommandLog::Attach(mongoc_client_t* client) {
  mongoc_apm_callbacks_t* callbacks = NewCallbacks();
  mongoc_client_set_apm_callbacks(client, callbacks, this);
  mongoc_apm_callbacks_destroy(callbacks);
}

void CommandLog::Record(Phase phase, const char* name, const bson_t* body) {
  std::lock_guard lock(mutex_);
  events_.push_back(CommandEvent{phase, name, Bson(body)});
}

std::vector<CommandEvent> CommandLog::Events(std::string_view name, Phase phase) const {
  std::lock_guard lock(mutex_);
  std::vector<CommandEvent> result;
  for (const CommandEvent& event : events_) {
    if (event.phase == phase && event.name == name) result.push_back(event);
  }
  return result;
}

void CommandLog::Clear() {
  std::lock_guard lock(mutex_);
  events_.clear();
}

// ---- DriverTest ----

std::string TestDatabaseName(std::string_view suffix) {
  const testing::TestInfo* test = testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string(test->test_suite_name()) + "_" + test->name();
  for (char& c : name) {
    if (std::isalnum(static_cast<unsigned char>(c)) == 0) c = '_';
  }
  // Short enough for MongoDB's 64-byte limit, unique per test and process.
  char hash[9];
  std::snprintf(hash, sizeof hash, "%08x", static_cast<unsigned>(std::hash<std::string>{}(name)));
  return "rc_" + name.substr(0, 30) + "_" + hash + "_" + std::to_string(getpid()) + std::string(suffix);
}

void DriverTest::SetUp() {
  db_name_ = TestDatabaseName();
  UriPtr uri = MakeUri();
  ASSERT_TRUE(uri);
  bson_error_t error;
  pool_.reset(mongoc_client_pool_new_with_error(uri.get(), &error));
  ASSERT_TRUE(pool_) << error.message;
  mongoc_client_pool_set_error_api(pool_.get(), MONGOC_ERROR_API_VERSION_2);
  log_.Attach(pool_.get());
  client_ = mongoc_client_pool_pop(pool_.get());
  ASSERT_NE(client_, nullptr);
}

void DriverTest::TearDown() {
  if (client_ != nullptr) {
    mongoc_database_t* db = mongoc_client_get_database(client_, db_name_.c_str());
    bson_error_t error;
    EXPECT_TRUE(mongoc_database_drop_with_opts(db, nullptr, &error))
        << "dropping " << db_name_ << ": " << error.message;
    mongoc_database_destroy(db);
    mongoc_client_pool_push(pool_.get(), client_);
    client_ = nullptr;
  }
  pool_.reset();
  std::string why;
  EXPECT_TRUE(harness::ProxyAlive(&why)) << why << " during this test";
}

CollectionPtr DriverTest::Collection(const char* name) {
  return CollectionPtr(mongoc_client_get_collection(client_, db_name_.c_str(), name));
}

void DriverTest::InsertAll(mongoc_collection_t* collection, const std::vector<Bson>& documents) {
  std::vector<const bson_t*> pointers = Pointers(documents);
  Bson reply;
  bson_error_t error;
  EXPECT_TRUE(mongoc_collection_insert_many(collection, pointers.data(), pointers.size(), nullptr,
                                            reply.out(), &error))
      << error.message << " " << reply.Json();
}

std::optional<Bson> DriverTest::RunCommand(const Bson& command, bson_error_t* error) {
  bson_error_t local;
  Bson reply;
  if (!mongoc_client_command_simple(client_, db_name_.c_str(), command.get(), nullptr, reply.out(),
                                    error != nullptr ? error : &local)) {
    return std::nullopt;
  }
  return reply;
}

}  // namespace e2e
