#include "proxy/routing/request_route.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <string_view>

#include "common/bson_walk.h"
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

// The first id of a killCursors command's `cursors`.
int64_t FirstCursorToKill(std::span<const uint8_t> command_document) {
  bson_t body;
  if (!bson_init_static(&body, command_document.data(), command_document.size())) return 0;
  std::optional<bson_iter_t> cursors = Find(&body, "cursors");
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
  const std::string_view command = request.command;
  route.authenticates = IsAuthentication(request);
  if (request.is_handshake) {
    route.kind = RequestRoute::Kind::kHandshake;
    return route;
  }
  if (request.is_legacy()) return route;
  const bool cursor_command = command == "getMore" || command == "killCursors";
  // One walk for the fields that matter to routing (this runs for every
  // request): libbson only for the rare ones.
  std::span<const uint8_t> preference;
  std::span<const uint8_t> lsid;
  bool in_transaction = false;
  const bool well_formed = WalkTopLevel(request.command_document, [&](const BsonElement& element) {
    const std::string_view key = element.key;
    if (key == "$readPreference") {
      preference = element.value;
    } else if (key == "lsid") {
      if (element.type == 0x03) lsid = element.value;
    } else if (key == "autocommit") {
      in_transaction = element.type == 0x08 && element.value[0] == 0;
    } else if (key == "startTransaction") {
      route.starts_transaction = element.type == 0x08 && element.value[0] == 1;
    } else if (key == "getMore" && element.type == 0x12) {
      std::memcpy(&route.cursor_id, element.value.data(), sizeof route.cursor_id);
    }
    return true;
  });
  if (!well_formed) return route;
  if (in_transaction && !lsid.empty()) route.transaction.assign(reinterpret_cast<const char*>(lsid.data()), lsid.size());
  if (cursor_command) {
    route.kind = RequestRoute::Kind::kCursor;
    if (command == "killCursors") route.cursor_id = FirstCursorToKill(request.command_document);
    return route;
  }
  route.may_open_cursor = command == "find" || command == "aggregate" || command == "listCollections" ||
                          command == "listIndexes";
  if (preference.empty()) return route;
  // The value as a document of its own, {$readPreference: value}, for libbson.
  bson_t body;
  bson_iter_t value;
  if (!bson_init_static(&body, request.command_document.data(), request.command_document.size()) ||
      !bson_iter_init_find(&value, &body, "$readPreference"))
    return route;
  std::variant<ReadPreference, SelectionError> parsed = ParseReadPreference(value, heartbeat);
  if (auto* error = std::get_if<SelectionError>(&parsed)) return *error;
  route.preference = std::get<ReadPreference>(std::move(parsed));
  // A transaction reads from its primary; writes go there whatever is asked.
  if (!route.preference.is_primary() && route.transaction.empty() && IsRead(command) &&
      !Writes(command, &body))
    route.kind = RequestRoute::Kind::kRead;
  return route;
}

bool IsAuthentication(const wire::Request& request) {
  const std::string_view command = request.command;
  if (command == "saslStart" || command == "saslContinue" || command == "authenticate") return true;
  if (!request.is_handshake) return false;
  // A legacy OP_QUERY handshake is walked too: its query is a document.
  bool speculative = false;
  WalkTopLevel(request.command_document, [&speculative](const BsonElement& element) {
    speculative = element.key == "speculativeAuthenticate";
    return !speculative;
  });
  return speculative;
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
