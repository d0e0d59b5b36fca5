#include "engine/catalog.h"

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "engine/rewrites.h"
#include "rewrite/cursor_reply.h"

namespace remold {
namespace {

// A logical collection stored in another collection of the same database.
struct StoredElsewhere {
  std::string logical;
  std::string source;
  std::string rule;
};

// The client's filter, when remold can apply it to an entry: `name` as a
// string, {$eq: s} or {$in: [s...]}, and `type` as a string.
class NameFilter {
 public:
  // nullopt when the filter says anything else.
  static std::optional<NameFilter> Parse(const std::optional<Doc>& filter) {
    NameFilter parsed;
    if (!filter) return parsed;
    bson_iter_t it;
    bson_iter_init(&it, filter->get());
    while (bson_iter_next(&it)) {
      const std::string_view key = bson_iter_key(&it);
      if (key == "type" && BSON_ITER_HOLDS_UTF8(&it)) {
        parsed.type_ = bson_iter_utf8(&it, nullptr);
      } else if (key == "name") {
        std::optional<std::set<std::string>> names = Names(it);
        if (!names) return std::nullopt;
        parsed.names_ = std::move(names);
      } else {
        return std::nullopt;
      }
    }
    return parsed;
  }

  bool Matches(std::string_view name, std::string_view type) const {
    if (type_ && *type_ != type) return false;
    return !names_ || names_->count(std::string(name)) > 0;
  }

 private:
  static std::optional<std::set<std::string>> Names(const bson_iter_t& it) {
    if (BSON_ITER_HOLDS_UTF8(&it)) return std::set<std::string>{bson_iter_utf8(&it, nullptr)};
    bson_t spec;
    uint32_t length = 0;
    const uint8_t* data = nullptr;
    if (!BSON_ITER_HOLDS_DOCUMENT(&it)) return std::nullopt;
    bson_iter_document(&it, &length, &data);
    if (!bson_init_static(&spec, data, length) || bson_count_keys(&spec) != 1) return std::nullopt;
    bson_iter_t op;
    bson_iter_init(&op, &spec);
    bson_iter_next(&op);
    const std::string_view name = bson_iter_key(&op);
    if (name == "$eq" && BSON_ITER_HOLDS_UTF8(&op))
      return std::set<std::string>{bson_iter_utf8(&op, nullptr)};
    if (name != "$in" || !BSON_ITER_HOLDS_ARRAY(&op)) return std::nullopt;
    std::set<std::string> names;
    bool only_strings = true;
    ForEachChild(op, [&](std::string_view, const bson_iter_t& value) {
      if (BSON_ITER_HOLDS_UTF8(&value)) names.insert(bson_iter_utf8(&value, nullptr));
      else only_strings = false;
    });
    if (!only_strings) return std::nullopt;
    return names;
  }

  std::optional<std::string> type_;
  std::optional<std::set<std::string>> names_;
};

// {$or: [<client filter>, {name: {$in: [<sources>]}}]}: what the backend
// lists, so that every source's entry is there to copy.
Doc WidenedFilter(const std::optional<Doc>& client, const std::vector<StoredElsewhere>& stored) {
  Doc sources, in, name;
  for (size_t i = 0; i < stored.size(); ++i)
    AppendString(sources.mut(), std::to_string(i), stored[i].source);
  bson_append_array(in.mut(), "$in", -1, sources.get());
  AppendDoc(name.mut(), "name", in);
  if (!client || client->empty()) return Doc();
  Doc either, filter;
  bson_t list;
  bson_append_array_begin(either.mut(), "$or", -1, &list);
  bson_append_document(&list, "0", -1, client->get());
  bson_append_document(&list, "1", -1, name.get());
  bson_append_array_end(either.mut(), &list);
  return either;
}

// `entry` under the name `logical`.
Doc Renamed(const Doc& entry, std::string_view logical) {
  Doc out;
  bson_iter_t it;
  bson_iter_init(&it, entry.get());
  while (bson_iter_next(&it)) {
    const std::string_view key = bson_iter_key(&it);
    if (key == "name") AppendString(out.mut(), key, logical);
    else AppendValue(out.mut(), key, it);
  }
  return out;
}

std::string TypeOf(const Doc& entry) {
  return FindString(entry.get(), "type").value_or("collection");
}

}  // namespace

std::optional<Plan> ListCollectionsPlan(const Command& command, const RuleSet& rules) {
  std::vector<StoredElsewhere> stored;
  for (const Rule& rule : rules.rules()) {
    const Namespace& logical = rule.logical();
    const Namespace source = ViewSourceOf(rule);
    if (logical.db != command.db || source == logical || source.db != command.db) continue;
    stored.push_back({logical.collection, source.collection, rule.name});
  }
  if (stored.empty()) return std::nullopt;
  std::optional<Doc> client_filter = FindDocument(command.body.get(), "filter");
  std::optional<NameFilter> filter = NameFilter::Parse(client_filter);
  if (!filter) return std::nullopt;  // lists only what the backend has

  BackendCommand list;
  bson_iter_t it;
  bson_iter_init(&it, command.body.get());
  while (bson_iter_next(&it)) {
    const std::string_view key = bson_iter_key(&it);
    if (key != "filter") {
      AppendValue(list.body.mut(), key, it);
      continue;
    }
    Doc widened = WidenedFilter(client_filter, stored);
    if (!widened.empty()) AppendDoc(list.body.mut(), key, widened);
  }

  Plan plan;
  plan.rule = stored.front().rule;
  plan.commands.push_back(std::move(list));
  plan.shape = [stored, filter = *filter](std::span<const Doc> replies) {
    ShapedReply out;
    const Doc& reply = replies.front();
    if (!IsOkReply(reply)) {
      out.reply = reply;
      return out;
    }
    std::vector<Doc> entries = FirstBatch(reply);
    std::set<std::string> listed;
    for (const Doc& entry : entries) listed.insert(FindString(entry.get(), "name").value_or(""));
    std::vector<Doc> batch;
    for (const Doc& entry : entries) {
      const std::string name = FindString(entry.get(), "name").value_or("");
      if (filter.Matches(name, TypeOf(entry))) batch.push_back(entry);
      for (const StoredElsewhere& s : stored) {
        if (s.source != name || listed.count(s.logical) || !filter.Matches(s.logical, TypeOf(entry)))
          continue;
        batch.push_back(Renamed(entry, s.logical));
      }
    }
    out.reply = RewriteCursorReply(reply, [&](std::string_view key, const bson_iter_t&,
                                              CursorOut cursor) {
      if (key != "firstBatch") return false;
      bson_t array;
      bson_append_array_begin(cursor.doc, "firstBatch", -1, &array);
      for (size_t i = 0; i < batch.size(); ++i)
        bson_append_document(&array, std::to_string(i).c_str(), -1, batch[i].get());
      bson_append_array_end(cursor.doc, &array);
      return true;
    });
    return out;
  };
  return plan;
}

}  // namespace remold
