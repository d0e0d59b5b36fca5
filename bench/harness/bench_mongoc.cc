// mongo-c-driver helpers shared by the benches: see bench_mongoc.h.
#include "bench_mongoc.h"

#include <cctype>
#include <cstdio>
#include <exception>
#include <stdexcept>

#include "bench_common.h"

namespace bench_common {

Documents::~Documents() {
  for (bson_t* doc : docs_) bson_destroy(doc);
}

CollectionPtr collection(mongoc_client_t* client, const char* db, const char* name) {
  return CollectionPtr(mongoc_client_get_collection(client, db, name));
}

SharedCollection shared_collection(mongoc_client_t* client, const char* db, const char* name) {
  return SharedCollection(mongoc_client_get_collection(client, db, name), CollectionDeleter());
}

BsonPtr json(const std::string& text) {
  bson_error_t error;
  bson_t* b = bson_new_from_json(reinterpret_cast<const uint8_t*>(text.data()),
                                 static_cast<ssize_t>(text.size()), &error);
  if (!b) throw std::runtime_error("bad JSON in the bench: " + text + ": " + error.message);
  return BsonPtr(b);
}

std::string to_json(const bson_t* doc) {
  char* s = bson_as_relaxed_extended_json(doc, nullptr);
  std::string out = s ? s : "<invalid BSON>";
  bson_free(s);
  return out;
}

std::optional<double> number_at(const bson_t* doc, const char* path) {
  bson_iter_t it, found;
  if (!bson_iter_init(&it, doc) || !bson_iter_find_descendant(&it, path, &found)) return std::nullopt;
  if (!BSON_ITER_HOLDS_NUMBER(&found)) return std::nullopt;
  return bson_iter_as_double(&found);
}

namespace {

// `text` with every byte but RFC 3986's unreserved ones percent-encoded, as
// a user name or password must be inside a connection string.
std::string percent_encoded(const std::string& text) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace

ClientPtr connect(const std::string& endpoint, const char* appname) {
  std::string login, login_options;
  if (const std::optional<Credentials> credentials = bench_credentials()) {
    login = percent_encoded(credentials->user) + ":" + percent_encoded(credentials->password) + "@";
    login_options = "&authMechanism=SCRAM-SHA-256&authSource=" + percent_encoded(credentials->source);
  }
  const std::string uri = "mongodb://" + login + endpoint + "/?directConnection=true&appname=" + appname +
                          "&serverSelectionTimeoutMS=10000&socketTimeoutMS=600000" + login_options;
  bson_error_t error;
  mongoc_uri_t* parsed = mongoc_uri_new_with_error(uri.c_str(), &error);
  if (!parsed) throw std::runtime_error("bad URI for " + endpoint + ": " + error.message);
  ClientPtr client(mongoc_client_new_from_uri(parsed));
  mongoc_uri_destroy(parsed);
  if (!client) throw std::runtime_error(std::string("cannot create a client for ") + endpoint);
  mongoc_client_set_error_api(client.get(), MONGOC_ERROR_API_VERSION_2);
  auto ping = json(R"({"ping": 1})");
  if (!mongoc_client_command_simple(client.get(), "admin", ping.get(), nullptr, nullptr, &error))
    throw std::runtime_error("cannot reach " + endpoint + ": " + error.message);
  return client;
}

CommandResult run_command(mongoc_client_t* client, const char* db, const bson_t* cmd) {
  CommandResult r;
  r.reply.reset(bson_new());
  r.ok = mongoc_client_command_simple(client, db, cmd, nullptr, r.reply.get(), &r.error);
  return r;
}

BsonPtr command(mongoc_client_t* client, const char* db, const bson_t* cmd, bool allow_failure) {
  CommandResult r = run_command(client, db, cmd);
  if (!r.ok && !allow_failure)
    throw std::runtime_error(std::string("command failed on ") + db + ": " + to_json(cmd) +
                             ": " + r.error.message);
  return std::move(r.reply);
}

InsertResult insert_many(mongoc_collection_t* collection, const bson_t* const* docs, size_t count,
                         const bson_t* opts) {
  InsertResult result;
  bson_t reply;
  bson_error_t error;
  result.ok = mongoc_collection_insert_many(collection, const_cast<const bson_t**>(docs), count,
                                            opts, &reply, &error);
  result.inserted = static_cast<int64_t>(number_at(&reply, "insertedCount").value_or(0));
  if (!result.ok)
    result.error = std::string(error.message) + "; reply " + to_json(&reply);
  else if (result.inserted != static_cast<int64_t>(count))
    result.error = "insertedCount " + std::to_string(result.inserted) + " of " +
                   std::to_string(count) + "; reply " + to_json(&reply);
  result.ok = result.error.empty();
  bson_destroy(&reply);
  return result;
}

bool update_one_matching(mongoc_collection_t* collection, const bson_t* selector, const bson_t* update,
                         const char* what, long long id, bson_error_t* error) {
  bson_t reply;
  bool ok = mongoc_collection_update_one(collection, selector, update, nullptr, &reply, error);
  if (ok && number_at(&reply, "matchedCount").value_or(0) != 1) {
    ok = false;
    std::snprintf(error->message, sizeof error->message, "%s %lld matched %s", what, id, to_json(&reply).c_str());
  }
  bson_destroy(&reply);
  return ok;
}

void delete_all(mongoc_client_t* client, const char* db, const char* collection) {
  BsonPtr cmd(BCON_NEW("delete", BCON_UTF8(collection), "deletes", "[", "{", "q", "{", "}",
                       "limit", BCON_INT32(0), "}", "]"));
  command(client, db, cmd.get());
}

int64_t count_all(mongoc_client_t* client, const char* db, const char* collection, std::string* error) {
  mongoc_collection_t* coll = mongoc_client_get_collection(client, db, collection);
  bson_t filter = BSON_INITIALIZER;
  bson_error_t failure;
  const int64_t n = mongoc_collection_count_documents(coll, &filter, nullptr, nullptr, nullptr, &failure);
  bson_destroy(&filter);
  mongoc_collection_destroy(coll);
  if (n < 0 && error) *error = failure.message;
  return n;
}

int run_main(const char* program, const std::function<int()>& run) {
  mongoc_init();
  int status;
  try {
    status = run();
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s: fatal: %s\n", program, e.what());
    status = 1;
  }
  mongoc_cleanup();
  return status;
}

}  // namespace bench_common
