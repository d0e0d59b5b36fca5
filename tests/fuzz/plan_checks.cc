#include "tests/fuzz/plan_checks.h"

#include <bson/bson.h>

#include <string>

#include "proxy/rewrite_bridge.h"
#include "proxy/wire/bson_check.h"
#include "proxy/wire/op_msg.h"
#include "tests/fuzz/fuzz_failure.h"

namespace remold::fuzz {
namespace {

void RequireValid(const Doc& doc, const char* what) {
  if (std::optional<wire::WireError> error = wire::ValidateDocument(doc.bytes()))
    Fail(std::string(what) + " is not valid BSON: " + error->message + ": " + doc.ToCanonicalJson());
}

// An error code as remold states one: a non-zero int32, never 20.
void RequireCode(const bson_t* doc, const char* what) {
  std::optional<bson_iter_t> code = Find(doc, "code");
  Require(code && BSON_ITER_HOLDS_INT32(&*code), what);
  const int32_t value = bson_iter_int32(&*code);
  Require(value != 0 && value != 20, what);
  Require(FindString(doc, "errmsg").has_value(), what);
}

// How many statements a write command carries: its documents, updates or
// deletes (0 for any other command).
int64_t Statements(const Command& command) {
  const char* field = command.name == "insert"   ? "documents"
                      : command.name == "update" ? "updates"
                      : command.name == "delete" ? "deletes"
                                                 : nullptr;
  std::optional<bson_iter_t> array = field ? Find(command.body.get(), field) : std::nullopt;
  if (!array || !BSON_ITER_HOLDS_ARRAY(&*array)) return 0;
  int64_t count = 0;
  ForEachChild(*array, [&](std::string_view, const bson_iter_t&) { ++count; });
  return count;
}

}  // namespace

void CheckBackendCommand(const BackendCommand& command) {
  RequireValid(command.body, "a backend command's body");
  for (const Doc& doc : command.sequence) RequireValid(doc, "a document of a backend command's sequence");
  Require(FindString(command.body.get(), "$db").has_value(), "a backend command without a \"$db\" string");
  Require(!command.body.empty(), "an empty backend command");
  std::vector<uint8_t> message = EncodeBackendCommand(command, 1);
  wire::OpMsgView view;
  if (std::optional<wire::WireError> error = wire::ParseOpMsg(message, view))
    Fail("the OP_MSG of a backend command does not parse: " + error->message + ": " +
         FoldedCommand(command).ToCanonicalJson());
}

void CheckClientReply(const Doc& reply, bool backend_had_ok) {
  RequireValid(reply, "a client reply");
  if (backend_had_ok) Require(Find(reply.get(), "ok").has_value(), "a client reply without \"ok\"");
}

void CheckImmediateReply(const Doc& reply, const Command& command) {
  CheckClientReply(reply);
  if (!IsOkReply(reply)) {
    RequireCode(reply.get(), "a refusal without a code (non-zero int32, not 20) and errmsg");
    Require(FindString(reply.get(), "codeName").has_value(), "a refusal without a codeName");
  }
  std::optional<bson_iter_t> errors = Find(reply.get(), "writeErrors");
  if (!errors) return;
  Require(BSON_ITER_HOLDS_ARRAY(&*errors), "writeErrors that is not an array");
  for (const Doc& error : ArrayDocuments(*errors)) {
    std::optional<int64_t> index = FindInteger(error.get(), "index");
    Require(index && *index >= 0 && *index < Statements(command),
            "a write error whose index names none of the command's statements");
    RequireCode(error.get(), "a write error without a code (non-zero int32, not 20) and errmsg");
  }
}

}  // namespace remold::fuzz
