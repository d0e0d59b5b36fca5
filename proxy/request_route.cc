#include "proxy/request_route.h"

#include <algorithm>
#include <array>
#include <string_view>

#include "common/doc.h"

namespace remold {
namespace {

// Commands that only read, and so may go where `$readPreference` says.
// Any other command goes to the primary.
constexpr std::array<std::string_view, 19> kReads = {
    "find",         "aggregate",   "count",         "distinct",     "listCollections",
    "listIndexes",  "dbStats",     "collStats",     "dataSize",     "geoNear",
    "mapReduce",    "explain",     "listDatabases", "serverStatus", "buildInfo",
    "ping",         "dbHash",      "getParameter",  "hostInfo",
};

bool IsRead(std::string_view command) {
  return std::find(kReads.begin(), kReads.end(), command) != kReads.end();
}

// An aggregate that writes ($out, $merge), or a mapReduce to a collection.
bool Writes(std::string_view command, const bson_t* body) {
  if (command == "aggregate") {
    std::optional<bson_iter_t> pipeline = Find(body, "pipeline");
    if (!pipeline || !BSON_ITER_HOLDS_ARRAY(&*pipeline)) return false;
    bool writes = false;
    ForEachChild(*pipeline, [&](std::string_view, const bson_iter_t& stage) {
      bson_iter_t first;
      if (BSON_ITER_HOLDS_DOCUMENT(&stage) && bson_iter_recurse(&stage, &first) && bson_iter_next(&first)) {
        std::string_view name = bson_iter_key(&first);
        writes = writes || name == "$out" || name == "$merge";
      }
    });
    return writes;
  }
  if (command == "mapReduce") {
    std::optional<bson_iter_t> out = Find(body, "out");
    if (!out) return false;
    if (!BSON_ITER_HOLDS_DOCUMENT(&*out)) return true;
    bson_iter_t inline_out;
    return !(bson_iter_recurse(&*out, &inline_out) && bson_iter_find(&inline_out, "inline"));
  }
  return false;
}

int64_t CursorIdOf(std::string_view command, const bson_t* body) {
  if (command == "getMore") {
    std::optional<bson_iter_t> id = Find(body, "getMore");
    return id && BSON_ITER_HOLDS_INT64(&*id) ? bson_iter_int64(&*id) : 0;
  }
  std::optional<bson_iter_t> cursors = Find(body, "cursors");
  int64_t first = 0;
  if (cursors && BSON_ITER_HOLDS_ARRAY(&*cursors))
    ForEachChild(*cursors, [&](std::string_view, const bson_iter_t& id) {
      if (!first && BSON_ITER_HOLDS_INT64(&id)) first = bson_iter_int64(&id);
    });
  return first;
}

}  // namespace

std::variant<RequestRoute, SelectionError> RouteOf(const wire::Request& request,
                                                  std::chrono::milliseconds heartbeat) {
  RequestRoute route;
  if (request.is_handshake) {
    route.kind = RequestRoute::Kind::kHandshake;
    return route;
  }
  bson_t body;
  if (request.is_legacy() ||
      !bson_init_static(&body, request.command_document.data(), request.command_document.size()))
    return route;
  const std::string_view command = request.command;
  if (command == "getMore" || command == "killCursors") {
    route.kind = RequestRoute::Kind::kCursor;
    route.cursor_id = CursorIdOf(command, &body);
  }
  // One walk for the fields that matter to routing.
  bson_iter_t it;
  std::optional<bson_iter_t> preference;
  bool in_transaction = false;
  bson_iter_t lsid;
  bool has_lsid = false;
  if (bson_iter_init(&it, &body)) {
    while (bson_iter_next(&it)) {
      const char* key = bson_iter_key(&it);
      if (key[0] == '$' && std::string_view(key) == "$readPreference") preference = it;
      else if (key[0] == 'a' && std::string_view(key) == "autocommit") in_transaction = !bson_iter_as_bool(&it);
      else if (key[0] == 's' && std::string_view(key) == "startTransaction") route.starts_transaction = bson_iter_as_bool(&it);
      else if (key[0] == 'l' && std::string_view(key) == "lsid" && BSON_ITER_HOLDS_DOCUMENT(&it)) {
        lsid = it;
        has_lsid = true;
      }
    }
  }
  if (in_transaction && has_lsid) {
    uint32_t length = 0;
    const uint8_t* data = nullptr;
    bson_iter_document(&lsid, &length, &data);
    route.transaction.assign(reinterpret_cast<const char*>(data), length);
  }
  if (route.kind == RequestRoute::Kind::kCursor) return route;
  route.may_open_cursor = command == "find" || command == "aggregate" || command == "listCollections" ||
                          command == "listIndexes";
  if (!preference) return route;
  std::variant<ReadPreference, SelectionError> parsed = ParseReadPreference(*preference, heartbeat);
  if (auto* error = std::get_if<SelectionError>(&parsed)) return *error;
  route.preference = std::get<ReadPreference>(parsed);
  // A transaction reads from its primary; writes go there whatever is asked.
  if (!route.preference.is_primary() && route.transaction.empty() && IsRead(command) &&
      !Writes(command, &body))
    route.kind = RequestRoute::Kind::kRead;
  return route;
}

int64_t ReplyCursorId(std::span<const uint8_t> reply_document) {
  bson_t reply;
  if (!bson_init_static(&reply, reply_document.data(), reply_document.size())) return 0;
  std::optional<bson_iter_t> id = FindPath(&reply, "cursor.id");
  return id && BSON_ITER_HOLDS_INT64(&*id) ? bson_iter_int64(&*id) : 0;
}

bool IsNotPrimaryCode(int32_t code) {
  switch (code) {
    case 10107:  // NotWritablePrimary
    case 13435:  // NotPrimaryNoSecondaryOk
    case 13436:  // NotPrimaryOrSecondary
    case 11600:  // InterruptedAtShutdown
    case 11602:  // InterruptedDueToReplStateChange
    case 189:    // PrimarySteppedDown
    case 91:     // ShutdownInProgress
      return true;
    default:
      return false;
  }
}

}  // namespace remold
