// Catalog commands on a type's logical collection (see rewrite.h).
//
// A type's index is a partial index of the stored collection:
//   {key, name: "<logical>.<name>", partialFilterExpression: {<field>: <value>, <the client's>...}}
// so that it serves, and constrains (unique), that type's documents alone.
// A sparse index on one field becomes the partial index of the documents
// that have it, {<key field>: {$exists: true}, <field>: <value>}: the
// clause comes before the type's, which tells listIndexes to say `sparse`
// again. listIndexes lists the _id index and the indexes whose
// partialFilterExpression names the type, as the client created them.
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "patterns/polymorphic/rewrite.h"
#include "rewrite/cursor_reply.h"
#include "rewrite/stored_elsewhere.h"

namespace remold {
namespace {

BackendCommand ListStoredIndexes(const Command& command, const PolymorphicRule& rule) {
  BackendCommand list;
  AppendString(list.body.mut(), "listIndexes", rule.stored.collection);
  SealCommand(command, ArgumentTarget::kRead, rule.stored.db, list.body.mut());
  list.may_fail = true;  // no stored collection: no index
  return list;
}

// The index specs of a listIndexes reply (its first batch: remold's own
// listIndexes asks for no batch size, and a collection has few indexes).
std::vector<Doc> IndexSpecs(const Doc& reply) { return IsOkReply(reply) ? FirstBatch(reply) : std::vector<Doc>{}; }

// Whether a stored index is one of the type's: its partial filter names
// the type's value.
bool OfType(const PolymorphicRule& rule, const Doc& spec) {
  std::optional<Doc> filter = FindDocument(spec.get(), "partialFilterExpression");
  if (!filter) return false;
  std::optional<std::string> value = FindString(filter->get(), rule.field);
  std::optional<std::string> name = FindString(spec.get(), "name");
  return value == rule.value && name && name->starts_with(rule.IndexPrefix());
}

// A stored index spec as the client created it on the logical collection.
Doc AsCreated(const PolymorphicRule& rule, const Doc& spec) {
  Doc out;
  bson_iter_t it;
  bson_iter_init(&it, spec.get());
  while (bson_iter_next(&it)) {
    std::string_view key = bson_iter_key(&it);
    if (key == "name" && BSON_ITER_HOLDS_UTF8(&it) &&
        std::string_view(bson_iter_utf8(&it, nullptr)).starts_with(rule.IndexPrefix())) {
      // (OfType read the first "name"; a reply that repeats it is copied.)
      AppendString(out.mut(), "name", std::string(bson_iter_utf8(&it, nullptr)).substr(rule.IndexPrefix().size()));
    } else if (key == "ns") {
      AppendString(out.mut(), "ns", rule.logical.full());
    } else if (key == "partialFilterExpression") {
      // {[<sparse key field>: {$exists: true},] <field>: <value>, <the client's>...}
      Doc client;
      bool sparse = false, first = true;
      ForEachChild(it, [&](std::string_view clause, const bson_iter_t& value) {
        const bool sparse_clause = first && clause != rule.field;
        first = false;
        if (sparse_clause) sparse = true;
        else if (clause != rule.field) AppendValue(client.mut(), clause, value);
      });
      if (sparse) BSON_APPEND_BOOL(out.mut(), "sparse", true);
      if (!client.empty()) AppendDoc(out.mut(), "partialFilterExpression", client);
    } else {
      AppendValue(out.mut(), key, it);
    }
  }
  return out;
}

// The name MongoDB gives an index of `key` when none is given: "a_1_b_-1".
std::string DefaultIndexName(const Doc& key) {
  std::string name;
  bson_iter_t it;
  bson_iter_init(&it, key.get());
  while (bson_iter_next(&it)) {
    if (!name.empty()) name += "_";
    name += bson_iter_key(&it);
    name += "_";
    if (BSON_ITER_HOLDS_UTF8(&it)) name += bson_iter_utf8(&it, nullptr);
    else if (BSON_ITER_HOLDS_DOUBLE(&it) && bson_iter_double(&it) != static_cast<double>(bson_iter_as_int64(&it)))
      name += std::to_string(bson_iter_double(&it));
    else name += std::to_string(bson_iter_as_int64(&it));
  }
  return name;
}

// A client's index spec as the stored collection's, or why not.
std::variant<Doc, Refusal> StoredIndex(const PolymorphicRule& rule, const Doc& spec, const std::string& who) {
  const Doc key = FindDocument(spec.get(), "key").value_or(Doc());
  bson_iter_t k;
  bson_iter_init(&k, key.get());
  size_t fields = 0;
  std::string first_field;
  while (bson_iter_next(&k)) {
    if (fields++ == 0) first_field = bson_iter_key(&k);
    std::string_view path = bson_iter_key(&k);
    if (path == rule.field || path.starts_with(rule.field + "."))
      return Refusal{error_codes::kBadValue, who + ": an index on '" + rule.field +
                                                 "', which the rule keeps for itself, is not supported"};
  }
  const std::string name = FindString(spec.get(), "name").value_or(DefaultIndexName(key));
  if (name == "_id_") return spec;  // the stored collection's own
  const bool sparse = FindBool(spec.get(), "sparse").value_or(false);
  if (sparse && fields != 1)
    return Refusal{error_codes::kCannotCreateIndex,
                   who + ": a sparse index on several fields is not supported on a type of a polymorphic collection "
                         "(it is stored as a partial index, which cannot say 'one of the fields exists'); index the "
                         "documents that have the fields with a partialFilterExpression instead"};
  const Doc client_filter = FindDocument(spec.get(), "partialFilterExpression").value_or(Doc());
  if (FilterNamesField(client_filter.get(), rule.field))
    return Refusal{error_codes::kBadValue, who + ": a partialFilterExpression naming '" + rule.field +
                                               "', which the rule keeps for itself, is not supported"};
  Doc filter;
  if (sparse) {
    Doc exists;
    BSON_APPEND_BOOL(exists.mut(), "$exists", true);
    AppendDoc(filter.mut(), first_field, exists);
  }
  AppendString(filter.mut(), rule.field, rule.value);
  bson_iter_t c;
  bson_iter_init(&c, client_filter.get());
  while (bson_iter_next(&c)) AppendValue(filter.mut(), bson_iter_key(&c), c);

  Doc out;
  bool named = false;
  bson_iter_t it;
  bson_iter_init(&it, spec.get());
  while (bson_iter_next(&it)) {
    std::string_view field = bson_iter_key(&it);
    if (field == "sparse" || field == "partialFilterExpression") continue;
    if (field == "name") {
      AppendString(out.mut(), "name", StoredIndexName(rule, name));
      named = true;
    } else {
      AppendValue(out.mut(), field, it);
    }
  }
  if (!named) AppendString(out.mut(), "name", StoredIndexName(rule, name));
  AppendDoc(out.mut(), "partialFilterExpression", filter);
  return out;
}

// The stored names of the type's indexes that `index` (a dropIndexes'
// argument) names, among `specs`; or why none.
std::variant<std::vector<std::string>, Refusal> NamedIndexes(const PolymorphicRule& rule, const bson_iter_t& index,
                                                             const std::vector<Doc>& specs) {
  std::vector<std::string> names;
  auto of_type = [&](const std::string& stored) {
    for (const Doc& spec : specs)
      if (FindString(spec.get(), "name") == stored && OfType(rule, spec)) return true;
    return false;
  };
  auto missing = [&](const std::string& what) {
    return Refusal{error_codes::kIndexNotFound, "index not found with name [" + what + "]"};
  };
  if (BSON_ITER_HOLDS_UTF8(&index)) {
    const std::string name = bson_iter_utf8(&index, nullptr);
    if (name == "*") {
      for (const Doc& spec : specs)
        if (OfType(rule, spec)) names.push_back(*FindString(spec.get(), "name"));
      return names;
    }
    if (name == "_id_") return Refusal{error_codes::kInvalidOptions, "cannot drop _id index"};
    if (!of_type(StoredIndexName(rule, name))) return missing(name);
    return std::vector<std::string>{StoredIndexName(rule, name)};
  }
  if (BSON_ITER_HOLDS_ARRAY(&index)) {
    bool bad = false;
    std::string absent;
    ForEachChild(index, [&](std::string_view, const bson_iter_t& item) {
      if (!BSON_ITER_HOLDS_UTF8(&item)) {
        bad = true;
        return;
      }
      const std::string name = bson_iter_utf8(&item, nullptr);
      if (!of_type(StoredIndexName(rule, name)) && absent.empty()) absent = name;
      names.push_back(StoredIndexName(rule, name));
    });
    if (bad) return Refusal{error_codes::kTypeMismatch, "dropIndexes 'index' array must hold index names"};
    if (!absent.empty()) return missing(absent);
    return names;
  }
  if (BSON_ITER_HOLDS_DOCUMENT(&index)) {
    uint32_t length = 0;
    const uint8_t* data = nullptr;
    bson_iter_document(&index, &length, &data);
    const Doc key = Doc::FromBytes({data, length});
    for (const Doc& spec : specs)
      if (OfType(rule, spec) && FindDocument(spec.get(), "key") == key) names.push_back(*FindString(spec.get(), "name"));
    if (names.empty()) return Refusal{error_codes::kIndexNotFound, "can't find index with key: " + key.ToRelaxedJson()};
    if (names.size() > 1)
      return Refusal{error_codes::kInvalidOptions, "several indexes have key " + key.ToRelaxedJson() + "; drop one by name"};
    return names;
  }
  return Refusal{error_codes::kTypeMismatch, "dropIndexes 'index' must be a name, a list of names or a key pattern"};
}

// One dropIndexes per name: a list of names is not taken by every engine.
std::vector<BackendCommand> DropStoredIndexes(const Command& command, const PolymorphicRule& rule,
                                              const std::vector<std::string>& names) {
  std::vector<BackendCommand> drops;
  for (const std::string& name : names) {
    BackendCommand drop;
    AppendString(drop.body.mut(), "dropIndexes", rule.stored.collection);
    AppendString(drop.body.mut(), "index", name);
    SealCommand(command, ArgumentTarget::kWrite, rule.stored.db, drop.body.mut());
    drops.push_back(std::move(drop));
  }
  return drops;
}

// The first reply after the listIndexes that is not ok, if any.
const Doc* FirstFailure(std::span<const Doc> replies) {
  for (size_t i = 1; i < replies.size(); ++i)
    if (!IsOkReply(replies[i])) return &replies[i];
  return nullptr;
}

ShapedReply Ok(const Doc& last) {
  ShapedReply out;
  BSON_APPEND_DOUBLE(out.reply.mut(), "ok", 1.0);
  CopyClusterFields(last, out.reply.mut());
  return out;
}

}  // namespace

Plan RewritePolymorphicCreateIndexes(const Command& command, const PolymorphicRule& rule, const std::string& who) {
  auto indexes = Find(command.body.get(), "indexes");
  if (!indexes || !BSON_ITER_HOLDS_ARRAY(&*indexes))
    return ImmediateReply(ErrorReply(error_codes::kFailedToParse, "createIndexes needs an 'indexes' array"));
  std::vector<Doc> stored;
  for (const Doc& spec : ArrayDocuments(*indexes)) {
    std::variant<Doc, Refusal> index = StoredIndex(rule, spec, who);
    if (auto* refusal = std::get_if<Refusal>(&index)) return ImmediateReply(ErrorReply(*refusal));
    stored.push_back(std::move(std::get<Doc>(index)));
  }
  BackendCommand backend;
  bson_iter_t it;
  bson_iter_init(&it, command.body.get());
  while (bson_iter_next(&it)) {
    std::string_view key = bson_iter_key(&it);
    if (key == "createIndexes") AppendString(backend.body.mut(), key, rule.stored.collection);
    else if (key == "indexes") AppendArray(backend.body.mut(), key, stored);
    else AppendValue(backend.body.mut(), key, it);
  }
  Plan plan;
  plan.commands.push_back(std::move(backend));
  plan.shape = [stored_ns = rule.stored.full(), logical = rule.logical.full()](std::span<const Doc> replies) {
    if (!IsOkReply(replies.front())) return ShapedReply{ErrorNamingLogical(replies.front(), stored_ns, logical), {}, {}, {}, {}, {}};
    return ShapedReply{replies.front(), {}, {}, {}, {}, {}};
  };
  return plan;
}

Plan RewritePolymorphicListIndexes(const Command& command, const PolymorphicRule& rule) {
  Plan plan;
  plan.commands.push_back(ListStoredIndexes(command, rule));
  plan.shape = [rule](std::span<const Doc> replies) {
    const Doc& reply = replies.front();
    if (!IsOkReply(reply)) return ShapedReply{ErrorNamingLogical(reply, rule.stored.full(), rule.logical.full()), {}, {}, {}, {}, {}};
    Doc out = RewriteCursorReply(reply, [&](std::string_view key, const bson_iter_t& value, CursorOut cursor) {
      if (key == "ns") {
        AppendString(cursor.doc, "ns", rule.logical.db + ".$cmd.listIndexes." + rule.logical.collection);
        return true;
      }
      if (key == "id") {
        BSON_APPEND_INT64(cursor.doc, "id", 0);
        return true;
      }
      if (key != "firstBatch" || !BSON_ITER_HOLDS_ARRAY(&value)) return false;
      std::vector<Doc> listed;
      for (const Doc& spec : ArrayDocuments(value)) {
        if (FindString(spec.get(), "name") == "_id_") listed.push_back(spec);
        else if (OfType(rule, spec)) listed.push_back(AsCreated(rule, spec));
      }
      AppendArray(cursor.doc, key, listed);
      return true;
    });
    return ShapedReply{std::move(out), {}, {}, {}, {}, {}};
  };
  return plan;
}

Plan RewritePolymorphicDropIndexes(const Command& command, const PolymorphicRule& rule, const std::string&) {
  auto index = Find(command.body.get(), "index");
  if (!index) return ImmediateReply(ErrorReply(error_codes::kFailedToParse, "dropIndexes needs 'index'"));
  Plan plan;
  plan.commands.push_back(ListStoredIndexes(command, rule));
  const Command client = command;
  plan.then = [client, rule](std::span<const Doc> replies) {
    const std::vector<Doc> specs = IndexSpecs(replies.front());
    bson_iter_t index;
    bson_iter_init_find(&index, client.body.get(), "index");
    auto names = NamedIndexes(rule, index, specs);
    if (std::get_if<Refusal>(&names) || std::get<std::vector<std::string>>(names).empty()) return Step{};
    return Step{DropStoredIndexes(client, rule, std::get<std::vector<std::string>>(names)), {}};
  };
  plan.shape = [client, rule](std::span<const Doc> replies) {
    const std::vector<Doc> specs = IndexSpecs(replies.front());
    bson_iter_t index;
    bson_iter_init_find(&index, client.body.get(), "index");
    auto names = NamedIndexes(rule, index, specs);
    if (auto* refusal = std::get_if<Refusal>(&names)) return ShapedReply{ErrorReply(*refusal), {}, {}, {}, {}, {}};
    if (const Doc* failure = FirstFailure(replies))
      return ShapedReply{ErrorNamingLogical(*failure, rule.stored.full(), rule.logical.full()), {}, {}, {}, {}, {}};
    int32_t was = 1;  // _id
    for (const Doc& spec : specs) was += OfType(rule, spec) ? 1 : 0;
    ShapedReply out;
    BSON_APPEND_INT32(out.reply.mut(), "nIndexesWas", was);
    BSON_APPEND_DOUBLE(out.reply.mut(), "ok", 1.0);
    CopyClusterFields(replies.back(), out.reply.mut());
    return out;
  };
  return plan;
}

Plan RewritePolymorphicCreate(const Command& command, const PolymorphicRule& rule, const std::string& who) {
  bson_iter_t it;
  bson_iter_init(&it, command.body.get());
  bson_iter_next(&it);  // the command name
  while (bson_iter_next(&it)) {
    std::string_view key = bson_iter_key(&it);
    if (!IsGenericArgument(key))
      return ImmediateReply(ErrorReply(error_codes::kInvalidOptions,
                                       who + ": create option '" + std::string(key) +
                                           "' is not supported on a type of a polymorphic collection (its documents "
                                           "are stored in " + rule.stored.full() + "); create it without options"));
  }
  BackendCommand create;
  AppendString(create.body.mut(), "create", rule.stored.collection);
  SealCommand(command, ArgumentTarget::kWrite, rule.stored.db, create.body.mut());
  create.may_fail = true;
  Plan plan;
  plan.commands.push_back(std::move(create));
  plan.shape = [](std::span<const Doc> replies) {
    const Doc& reply = replies.front();
    // The stored collection exists already: the other types made it.
    if (IsOkReply(reply) || FindInteger(reply.get(), "code") == 48) return Ok(reply);
    return ShapedReply{reply, {}, {}, {}, {}, {}};
  };
  return plan;
}

Plan RewritePolymorphicDrop(const Command& command, const PolymorphicRule& rule) {
  // The type's indexes, then its documents; the stored collection stays.
  Plan plan;
  plan.commands.push_back(ListStoredIndexes(command, rule));
  const Command client = command;
  plan.then = [client, rule](std::span<const Doc> replies) {
    std::vector<std::string> names;
    for (const Doc& spec : IndexSpecs(replies.front()))
      if (OfType(rule, spec)) names.push_back(*FindString(spec.get(), "name"));
    Doc statement, filter;
    AppendString(filter.mut(), rule.field, rule.value);
    AppendDoc(statement.mut(), "q", filter);
    BSON_APPEND_INT32(statement.mut(), "limit", 0);
    BackendCommand remove;
    AppendString(remove.body.mut(), "delete", rule.stored.collection);
    AppendArray(remove.body.mut(), "deletes", {statement});
    SealCommand(client, ArgumentTarget::kWrite, rule.stored.db, remove.body.mut());
    Step step{DropStoredIndexes(client, rule, names), {}};
    step.commands.push_back(std::move(remove));
    return step;
  };
  plan.shape = [logical = rule.logical.full(), stored = rule.stored.full()](std::span<const Doc> replies) {
    const Doc& last = replies.back();
    if (const Doc* failure = FirstFailure(replies))
      return ShapedReply{ErrorNamingLogical(*failure, stored, logical), {}, {}, {}, {}, {}};
    ShapedReply out;
    AppendString(out.reply.mut(), "ns", logical);
    BSON_APPEND_DOUBLE(out.reply.mut(), "ok", 1.0);
    CopyClusterFields(last, out.reply.mut());
    return out;
  };
  return plan;
}

}  // namespace remold
