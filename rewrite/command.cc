#include "rewrite/command.h"

#include <algorithm>

#include <array>

#include "common/utf8.h"

namespace remold {
namespace {

constexpr std::array<std::string_view, 11> kAlwaysCopied = {
    "lsid",       "$clusterTime", "$readPreference", "comment",      "maxTimeMS",
    "apiVersion", "apiStrict",    "apiDeprecationErrors", "$audit", "$client", "mayBypassWriteBlocking"};

bool IsAlwaysCopied(std::string_view key) {
  for (auto k : kAlwaysCopied)
    if (k == key) return true;
  return false;
}

}  // namespace

std::optional<Command> CommandFromDocument(Doc body, std::string_view default_db) {
  bson_iter_t first;
  if (!bson_iter_init(&first, body.get()) || !bson_iter_next(&first)) return std::nullopt;
  Command command;
  command.name = bson_iter_key(&first);
  if (auto db = FindString(body.get(), "$db")) {
    command.db = *db;
  } else if (!default_db.empty()) {
    command.db = default_db;
    AppendString(body.mut(), "$db", default_db);
  } else {
    return std::nullopt;
  }
  command.body = std::move(body);
  return command;
}

bool InTransaction(const Command& command) {
  return Find(command.body.get(), "autocommit").has_value();
}

void CopyGenericArguments(const Command& client, ArgumentTarget target, bson_t* out) {
  const bool in_transaction = InTransaction(client);
  bson_iter_t iter;
  if (!bson_iter_init(&iter, client.body.get())) return;
  while (bson_iter_next(&iter)) {
    std::string_view key = bson_iter_key(&iter);
    bool copy = false;
    if (target == ArgumentTarget::kAdmin) {
      copy = key == "comment" || key == "maxTimeMS" || key == "$readPreference";
    } else if (IsAlwaysCopied(key)) {
      copy = true;
    } else if (key == "txnNumber") {
      copy = target == ArgumentTarget::kWrite || in_transaction;
    } else if (key == "writeConcern" || key == "bypassDocumentValidation") {
      copy = target == ArgumentTarget::kWrite || target == ArgumentTarget::kPreparatoryWrite;
    } else if (key == "autocommit" || key == "startTransaction") {
      copy = in_transaction;
    } else if (key == "readConcern") {
      copy = target == ArgumentTarget::kRead || in_transaction;
    }
    if (copy) AppendValue(out, key, iter);
  }
}

void SealCommand(const Command& client, ArgumentTarget target, std::string_view db, bson_t* out) {
  CopyGenericArguments(client, target, out);
  AppendString(out, "$db", db);
}

BackendCommand UpdateCommand(const Command& client, ArgumentTarget arguments,
                             const Namespace& target, bool ordered, std::vector<Doc> statements) {
  BackendCommand update;
  bson_t* body = update.body.mut();
  AppendString(body, "update", target.collection);
  BSON_APPEND_BOOL(body, "ordered", ordered);
  SealCommand(client, arguments, target.db, body);
  update.sequence_id = "updates";
  update.sequence = std::move(statements);
  return update;
}

std::vector<Doc> InLockOrder(std::vector<Doc> statements) {
  auto filter_bytes = [](const Doc& statement) {
    std::optional<bson_iter_t> q = Find(statement.get(), "q");
    if (!q || !BSON_ITER_HOLDS_DOCUMENT(&*q)) return std::string_view();
    uint32_t length = 0;
    const uint8_t* data = nullptr;
    bson_iter_document(&*q, &length, &data);
    return std::string_view(reinterpret_cast<const char*>(data), length);
  };
  std::stable_sort(statements.begin(), statements.end(),
                   [&](const Doc& a, const Doc& b) { return filter_bytes(a) < filter_bytes(b); });
  return statements;
}

Doc ErrorReply(ErrorCode code, std::string_view message) {
  return ErrorReply(code.value, code.name, message);
}

Doc ErrorReply(int code, std::string_view code_name, std::string_view message) {
  Doc doc;
  BSON_APPEND_DOUBLE(doc.mut(), "ok", 0.0);
  AppendString(doc.mut(), "errmsg", ValidUtf8(message));
  BSON_APPEND_INT32(doc.mut(), "code", code);
  if (!code_name.empty()) AppendString(doc.mut(), "codeName", code_name);
  return doc;
}

}  // namespace remold
