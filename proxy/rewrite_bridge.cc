#include "proxy/rewrite_bridge.h"

#include "common/bson_walk.h"
#include "engine/engine.h"
#include "proxy/wire/bson_check.h"
#include "proxy/wire/op_msg.h"
#include "rewrite/command_namespace.h"

namespace remold {
namespace {

// mongod gives every inserted document an _id; a rewritten insert never
// reaches that code, so remold does it here, as the first field.
void AddMissingIds(Command& command) {
  auto documents = Find(command.body.get(), "documents");
  if (!documents || !BSON_ITER_HOLDS_ARRAY(&*documents)) return;
  // Drivers give every document an _id: look before copying anything.
  bool all_have_ids = true;
  for (std::span<const uint8_t> view : ArrayDocumentViews(*documents)) {
    bool has_id = false;
    WalkTopLevel(view, [&has_id](const BsonElement& element) {
      has_id = element.key == "_id";
      return !has_id;
    });
    all_have_ids = all_have_ids && has_id;
  }
  if (all_have_ids) return;
  std::vector<Doc> docs = ArrayDocuments(*documents);
  bool changed = false;
  for (Doc& doc : docs) {
    if (Find(doc.get(), "_id")) continue;
    Doc with_id;
    bson_oid_t oid;
    bson_oid_init(&oid, nullptr);
    BSON_APPEND_OID(with_id.mut(), "_id", &oid);
    bson_concat(with_id.mut(), doc.get());
    doc = std::move(with_id);
    changed = true;
  }
  if (!changed) return;
  Doc body;
  bson_copy_to_excluding_noinit(command.body.get(), body.mut(), "documents", nullptr);
  AppendArray(body.mut(), "documents", docs);
  command.body = std::move(body);
}

// The common case, decided from the command's first value alone: a command
// that names its collection there, on a collection no rule has in any
// database, concerns no rule. (Every command is asked while rules are
// loaded; reading the whole namespace first cost about 1,000 instructions
// per command, measured with callgrind.)
bool ConcernsNoRule(const wire::Request& request, const RuleSet& rules) {
  if (!NamesCollectionFirst(request.command) || MayConcernRulesElsewhere(request.command)) return false;
  bool concerns = false;
  WalkTopLevel(request.command_document, [&](const BsonElement& first) {
    // A string: int32 length (with the NUL), the bytes, the NUL.
    concerns = first.type == BSON_TYPE_UTF8 && first.value.size() >= 5 &&
               rules.MayConcern({reinterpret_cast<const char*>(first.value.data()) + 4, first.value.size() - 5});
    return false;
  });
  return !concerns;
}

}  // namespace

std::optional<Command> CommandForRules(const wire::Request& request, const RuleSet& rules) {
  if (rules.empty() || request.is_legacy() || request.is_handshake) return std::nullopt;
  if (ConcernsNoRule(request, rules)) return std::nullopt;
  bson_t body;
  if (!bson_init_static(&body, request.command_document.data(), request.command_document.size()))
    return std::nullopt;
  std::optional<CommandNamespace> ns = ResolveNamespace(request.command, &body);
  if (!ns) return std::nullopt;
  const bool ruled = ns->collection && rules.FindForCommand(ns->db, *ns->collection);
  if (!ruled && !MayConcernRulesElsewhere(request.command)) return std::nullopt;

  Command command;
  command.db = std::move(ns->db);
  command.name = request.command;
  command.body = Doc::FromBson(&body);
  for (const auto& sequence : request.sequences) {
    bson_t array;
    bson_append_array_begin(command.body.mut(), sequence.identifier.data(),
                            static_cast<int>(sequence.identifier.size()), &array);
    char buf[16];
    for (size_t i = 0; i < sequence.documents.size(); ++i) {
      const char* key;
      size_t len = bson_uint32_to_string(static_cast<uint32_t>(i), &key, buf, sizeof buf);
      bson_t doc;
      bson_init_static(&doc, sequence.documents[i].data(), sequence.documents[i].size());
      bson_append_document(&array, key, static_cast<int>(len), &doc);
    }
    bson_append_array_end(command.body.mut(), &array);
  }
  if (command.name == "insert") AddMissingIds(command);
  return command;
}

std::vector<uint8_t> EncodeBackendCommand(const BackendCommand& command, int32_t request_id) {
  std::vector<std::span<const uint8_t>> documents;
  documents.reserve(command.sequence.size());
  for (const Doc& doc : command.sequence) documents.push_back(doc.bytes());
  return wire::EncodeOpMsgWithSequence(request_id, 0, command.body.bytes(), command.sequence_id,
                                       documents);
}

void UpdateCapabilities(std::span<const uint8_t> handshake_reply, Capabilities& caps) {
  bson_t reply;
  if (!bson_init_static(&reply, handshake_reply.data(), handshake_reply.size())) return;
  auto read = [&](const char* key, int32_t& field) {
    bson_iter_t it;
    if (bson_iter_init_find(&it, &reply, key) && BSON_ITER_HOLDS_NUMBER(&it))
      field = static_cast<int32_t>(bson_iter_as_int64(&it));
  };
  read("maxWriteBatchSize", caps.max_write_batch_size);
  read("maxBsonObjectSize", caps.max_bson_object_size);
  read("maxMessageSizeBytes", caps.max_message_size_bytes);
  read("maxWireVersion", caps.max_wire_version);
}

bool EnsuredCommands::Contains(const std::string& key) const {
  std::lock_guard lock(mutex_);
  return done_.count(key) > 0;
}

void EnsuredCommands::Add(const std::string& key) {
  std::lock_guard lock(mutex_);
  done_.insert(key);
}

void EnsuredCommands::Clear() {
  std::lock_guard lock(mutex_);
  done_.clear();
}

}  // namespace remold
