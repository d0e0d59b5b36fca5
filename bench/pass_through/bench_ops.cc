// Commands of the timed operations and the seeding: see bench_ops.h.
#include "bench_ops.h"

#include <algorithm>

#include "bench_common.h"
#include "tools/common/scram_login.h"

namespace remold_bench {
namespace {

constexpr const char* kDb = "bench";
constexpr const char* kCollection = "c";
constexpr int32_t kInsertBatch = 1000;

void build_ping(bson_t* cmd) {
  BSON_APPEND_INT32(cmd, "ping", 1);
  BSON_APPEND_UTF8(cmd, "$db", "admin");
}

void build_find_by_id(bson_t* cmd, int32_t id) {
  bson_t filter;
  BSON_APPEND_UTF8(cmd, "find", kCollection);
  BSON_APPEND_DOCUMENT_BEGIN(cmd, "filter", &filter);
  BSON_APPEND_INT32(&filter, "_id", id);
  bson_append_document_end(cmd, &filter);
  BSON_APPEND_INT32(cmd, "limit", 1);
  BSON_APPEND_BOOL(cmd, "singleBatch", true);
  BSON_APPEND_UTF8(cmd, "$db", kDb);
}

// A document of roughly 200 bytes, typical of a small entity.
void append_seed_doc(bson_t* array, int32_t index, int32_t id) {
  const std::string key = std::to_string(index);
  const std::string name = "doc-" + std::to_string(id);
  const std::string payload(120, static_cast<char>('a' + id % 26));
  bson_t doc;
  BSON_APPEND_DOCUMENT_BEGIN(array, key.c_str(), &doc);
  BSON_APPEND_INT32(&doc, "_id", id);
  BSON_APPEND_UTF8(&doc, "name", name.c_str());
  BSON_APPEND_INT32(&doc, "n", id);
  BSON_APPEND_DOUBLE(&doc, "score", id * 0.5);
  BSON_APPEND_UTF8(&doc, "payload", payload.c_str());
  bson_append_document_end(array, &doc);
}

// Runs one command and throws unless ok: 1; returns the reply's "n".
int64_t checked_command(WireClient& client, const bson_t& cmd, const char* what) {
  const bson_t& reply = client.command(cmd);
  if (!reply_ok(reply)) {
    throw WireError(std::string(what) + " failed: " + reply_error(reply));
  }
  bson_iter_t it;
  return bson_iter_init_find(&it, &reply, "n") ? bson_iter_as_int64(&it) : -1;
}

void drop_collection(WireClient& client) {
  bson_t cmd = BSON_INITIALIZER;
  BSON_APPEND_UTF8(&cmd, "drop", kCollection);
  BSON_APPEND_UTF8(&cmd, "$db", kDb);
  client.command(cmd);  // ok: 0 (namespace not found) is fine
  bson_destroy(&cmd);
}

void insert_batch(WireClient& client, int32_t first, int32_t count) {
  bson_t cmd = BSON_INITIALIZER;
  bson_t docs;
  BSON_APPEND_UTF8(&cmd, "insert", kCollection);
  BSON_APPEND_ARRAY_BEGIN(&cmd, "documents", &docs);
  for (int32_t i = 0; i < count; ++i) append_seed_doc(&docs, i, first + i);
  bson_append_array_end(&cmd, &docs);
  BSON_APPEND_UTF8(&cmd, "$db", kDb);
  const int64_t n = checked_command(client, cmd, "insert");
  bson_destroy(&cmd);
  if (n != count) throw WireError("insert wrote " + std::to_string(n) + " documents");
}

int64_t count_documents(WireClient& client) {
  bson_t cmd = BSON_INITIALIZER;
  BSON_APPEND_UTF8(&cmd, "count", kCollection);
  BSON_APPEND_UTF8(&cmd, "$db", kDb);
  const int64_t n = checked_command(client, cmd, "count");
  bson_destroy(&cmd);
  return n;
}

}  // namespace

std::optional<OpKind> parse_op(const std::string& name) {
  if (name == "ping") return OpKind::ping;
  if (name == "find_by_id") return OpKind::find_by_id;
  return std::nullopt;
}

const char* op_name(OpKind op) {
  return op == OpKind::ping ? "ping" : "find_by_id";
}

std::string run_op(WireClient& client, OpKind op, int32_t id) {
  bson_t cmd = BSON_INITIALIZER;  // small commands stay in inline storage
  if (op == OpKind::ping) {
    build_ping(&cmd);
  } else {
    build_find_by_id(&cmd, id);
  }
  const bson_t& reply = client.command(cmd);
  bson_destroy(&cmd);
  if (!reply_ok(reply)) return reply_error(reply);
  if (op == OpKind::find_by_id) {
    const int found = first_batch_size(reply);
    if (found != 1) {
      return "find _id " + std::to_string(id) + " returned " +
             std::to_string(found) + " documents, expected 1";
    }
  }
  return {};
}

void handshake(WireClient& client) {
  bson_t cmd = BSON_INITIALIZER;
  BSON_APPEND_INT32(&cmd, "isMaster", 1);
  BSON_APPEND_UTF8(&cmd, "$db", "admin");
  checked_command(client, cmd, "isMaster");
  bson_destroy(&cmd);
  const std::optional<bench_common::Credentials> credentials = bench_common::bench_credentials();
  if (!credentials) return;
  const remold::CommandRunner run = [&client](const std::string& db, const remold::Doc& command) {
    remold::Doc body = command;
    remold::AppendString(body.mut(), "$db", db);
    return remold::Doc::FromBson(&client.command(*body.get()));
  };
  if (std::optional<remold::LoginFailure> failure =
          remold::ScramLogin(run, remold::AuthMechanism::kScramSha256, credentials->user, credentials->password,
                             credentials->source))
    throw WireError("SCRAM-SHA-256 login as '" + credentials->user + "' failed: " + failure->why);
}

void seed_collection(WireClient& client, int32_t count) {
  drop_collection(client);
  for (int32_t first = 0; first < count; first += kInsertBatch) {
    insert_batch(client, first, std::min(kInsertBatch, count - first));
  }
  const int64_t n = count_documents(client);
  if (n != count) {
    throw WireError("bench.c holds " + std::to_string(n) + " documents, expected " +
                    std::to_string(count));
  }
}

}  // namespace remold_bench
