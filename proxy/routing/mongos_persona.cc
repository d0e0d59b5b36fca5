#include "proxy/routing/mongos_persona.h"

#include <cstring>
#include <string>
#include <string_view>

#include "common/bson_walk.h"
#include "common/error_code.h"
#include "common/utf8.h"

namespace remold {
namespace {

// The one shard: "rs0/a:1,b:2" for a replica set (its members as the
// monitor knows them), "host:port" for a standalone.
Doc ShardDocument(const TopologyView* view, const BackendOptions& backend) {
  std::string host;
  std::string id = "shard0";
  if (view && !view->set_name.empty()) {
    id = view->set_name;
    host = view->set_name + "/";
    bool first = true;
    for (const Member& member : view->members) {
      host += (first ? "" : ",") + member.address;
      first = false;
    }
  } else if (view && !view->members.empty()) {
    host = view->members.front().address;
  } else {
    host = HostPortText(backend.hosts.front());
  }
  Doc shard;
  AppendString(shard.mut(), "_id", id);
  AppendString(shard.mut(), "host", host);
  BSON_APPEND_INT32(shard.mut(), "state", 1);
  return shard;
}

Doc Refusal(ErrorCode code, std::string_view message) {
  Doc reply;
  BSON_APPEND_DOUBLE(reply.mut(), "ok", 0.0);
  AppendString(reply.mut(), "errmsg", ValidUtf8(message));
  BSON_APPEND_INT32(reply.mut(), "code", code.value);
  AppendString(reply.mut(), "codeName", code.name);
  return reply;
}

}  // namespace

std::optional<Doc> AnswerAsMongos(const wire::Request& request, const TopologyView* view,
                                  const BackendOptions& backend) {
  const std::string_view command = request.command;
  if (command != "find" && command != "listShards" && command != "isdbgrid") return std::nullopt;
  if (view && view->kind == TopologyKind::kSharded) return std::nullopt;
  if (request.is_legacy()) return std::nullopt;
  // Every find comes here: its first element decides before libbson is used.
  if (command == "find") {
    bool on_shards = false;
    WalkTopLevel(request.command_document, [&on_shards](const BsonElement& first) {
      // A string: int32 length (with the NUL), then the bytes.
      on_shards = first.type == 0x02 && first.value.size() == 4 + 7 &&
                  std::memcmp(first.value.data() + 4, "shards", 7) == 0;
      return false;
    });
    if (!on_shards) return std::nullopt;
  }
  bson_t body;
  if (!bson_init_static(&body, request.command_document.data(), request.command_document.size()))
    return std::nullopt;
  const std::string db = FindString(&body, "$db").value_or("");
  Doc reply;
  if (command == "find") {
    if (db != "config") return std::nullopt;
    // The whole collection in the first batch: one document.
    Doc cursor;
    BSON_APPEND_INT64(cursor.mut(), "id", 0);
    AppendString(cursor.mut(), "ns", "config.shards");
    AppendArray(cursor.mut(), "firstBatch", {ShardDocument(view, backend)});
    AppendDoc(reply.mut(), "cursor", cursor);
  } else if (db != "admin") {
    return Refusal(ErrorCode{13, "Unauthorized"}, std::string(command) + " may only be run against the admin database.");
  } else if (command == "listShards") {
    AppendArray(reply.mut(), "shards", {ShardDocument(view, backend)});
  } else {
    BSON_APPEND_INT32(reply.mut(), "isdbgrid", 1);
    AppendString(reply.mut(), "hostname", "remold");
  }
  BSON_APPEND_DOUBLE(reply.mut(), "ok", 1.0);
  return reply;
}

}  // namespace remold
