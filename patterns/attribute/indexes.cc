#include "patterns/attribute/indexes.h"

#include <string>
#include <string_view>
#include <vector>

#include "patterns/attribute/rewrite.h"

namespace remold {
namespace {

// Options a pair index serves as well as an index of its own would.
bool Harmless(std::string_view option) {
  return option == "key" || option == "name" || option == "v" || option == "background";
}

std::string FirstComponent(std::string_view path) {
  return std::string(path.substr(0, path.find('.')));
}

// Why `spec` (one element of "indexes") cannot be served by the pair index;
// empty when it can. `attribute` receives the attribute it names.
std::string Unservable(const bson_t* spec, const AttributeRule& rule, std::string& attribute) {
  std::optional<Doc> key = FindDocument(spec, "key");
  if (!key) return "";
  int fields = 0;
  bool numeric = true;
  bson_iter_t it;
  bson_iter_init(&it, key->get());
  while (bson_iter_next(&it)) {
    ++fields;
    const std::string field = FirstComponent(bson_iter_key(&it));
    if (rule.IsAttribute(field) && attribute.empty()) attribute = field;
    if (!BSON_ITER_HOLDS_NUMBER(&it)) numeric = false;
  }
  if (attribute.empty()) return "";
  if (fields != 1) return "a compound index with an attribute cannot be served by the pair index";
  if (!numeric) return "only an ascending or descending index on an attribute can be served";
  bson_iter_init(&it, spec);
  while (bson_iter_next(&it)) {
    const std::string_view option = bson_iter_key(&it);
    if (!Harmless(option))
      return "option '" + std::string(option) + "' cannot be honoured on an attribute";
  }
  return "";
}

}  // namespace

std::optional<Plan> AttributeCreateIndexes(const Command& command, const RuleContext& rule,
                                           const AttributeRule& a) {
  std::optional<bson_iter_t> indexes = Find(command.body.get(), "indexes");
  if (!indexes || !BSON_ITER_HOLDS_ARRAY(&*indexes)) return std::nullopt;
  const std::string who = "attribute rule '" + rule.name + "' for " + a.logical.full() + ": ";
  std::vector<std::string> served;
  bool fixed = false;
  std::optional<Plan> refusal;
  ForEachChild(*indexes, [&](std::string_view, const bson_iter_t& element) {
    std::optional<Doc> spec;
    if (BSON_ITER_HOLDS_DOCUMENT(&element)) {
      uint32_t length = 0;
      const uint8_t* data = nullptr;
      bson_iter_document(&element, &length, &data);
      spec = Doc::FromBytes({data, length});
    }
    if (!spec || refusal) return;
    std::string attribute;
    std::string why = Unservable(spec->get(), a, attribute);
    if (!why.empty()) {
      refusal = ImmediateReply(ErrorReply(error_codes::kInvalidOptions,
          who + "index on attribute '" + attribute + "': " + why + " (attributes are stored as "
          "pairs in '" + a.array_field + "', served by one index on " + a.array_field + "." +
          a.key_name + " and " + a.array_field + "." + a.value_name + ")"));
      return;
    }
    if (attribute.empty()) fixed = true;
    else served.push_back(attribute);
  });
  if (refusal) return refusal;
  if (served.empty()) return std::nullopt;
  if (fixed)
    return ImmediateReply(ErrorReply(error_codes::kInvalidOptions,
        who + "index on attribute '" + served.front() + "' is served by the pair index, and the "
        "others of this command are not: send indexes on fixed fields in a createIndexes of "
        "their own"));

  std::string names;
  for (const std::string& name : served) names += (names.empty() ? "'" : ", '") + name + "'";
  Plan plan;
  BackendCommand ensure = EnsureAttributeIndex(a);
  Doc body;
  bson_copy_to_excluding_noinit(ensure.body.get(), body.mut(), "$db", nullptr);
  SealCommand(command, ArgumentTarget::kAdmin, a.logical.db, body.mut());
  ensure.body = std::move(body);
  plan.commands.push_back(std::move(ensure));
  const std::string note = "index on attribute " + names + " is served by remold's pair index " +
                           "{" + a.array_field + "." + a.key_name + ": 1, " + a.array_field + "." +
                           a.value_name + ": 1}; no index of its own was built";
  plan.shape = [note](std::span<const Doc> replies) {
    ShapedReply out;
    if (!IsOkReply(replies.front())) {
      out.reply = replies.front();
      return out;
    }
    bson_iter_t it;
    bson_iter_init(&it, replies.front().get());
    while (bson_iter_next(&it)) {
      const std::string_view key = bson_iter_key(&it);
      if (key == "note") continue;
      if (key == "ok") AppendString(out.reply.mut(), "note", note);
      AppendValue(out.reply.mut(), key, it);
    }
    return out;
  };
  return plan;
}

}  // namespace remold
