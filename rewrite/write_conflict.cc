#include "rewrite/write_conflict.h"

#include <string_view>

#include "common/error_code.h"

namespace remold {
namespace {

// The statements of a write command: in its document sequence, or in its
// body's array; findAndModify has one. -1: not a write.
int64_t StatementCount(const BackendCommand& command) {
  bson_iter_t it;
  if (!bson_iter_init(&it, command.body.get()) || !bson_iter_next(&it)) return -1;
  const std::string_view name = bson_iter_key(&it);
  if (name == "findAndModify" || name == "findandmodify") return 1;
  const char* items = name == "insert" ? "documents" : name == "update" ? "updates" : name == "delete" ? "deletes" : nullptr;
  if (!items) return -1;
  if (!command.sequence_id.empty()) return static_cast<int64_t>(command.sequence.size());
  std::optional<bson_iter_t> array = Find(command.body.get(), items);
  if (!array || !BSON_ITER_HOLDS_ARRAY(&*array)) return -1;
  return static_cast<int64_t>(ArrayDocumentViews(*array).size());
}

bool IsWriteConflict(const bson_t* error) {
  return FindInteger(error, "code").value_or(0) == error_codes::kWriteConflict.value;
}

}  // namespace

bool ResendAfterWriteConflict(const BackendCommand& command, const Doc& reply) {
  if (Find(command.body.get(), "autocommit")) return false;  // a statement of a client's transaction
  if (StatementCount(command) != 1) return false;
  if (!IsOkReply(reply)) return IsWriteConflict(reply.get());
  // ok: 1 with the one statement's write error: it changed nothing.
  std::optional<bson_iter_t> errors = Find(reply.get(), "writeErrors");
  if (!errors || !BSON_ITER_HOLDS_ARRAY(&*errors)) return false;
  std::vector<Doc> list = ArrayDocuments(*errors);
  return list.size() == 1 && IsWriteConflict(list.front().get()) &&
         FindInteger(reply.get(), "n").value_or(0) == 0;
}

}  // namespace remold
